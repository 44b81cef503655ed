"""``python -m rfa.experiments.studies.length_generalization``: the study's command line (``rfa study
length_generalization``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("length_generalization")
