"""``python -m rfa.experiments.studies.distillation``: the study's command line (``rfa study distillation``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("distillation")
