"""``python -m rfa.experiments.studies.recall``: the study's command line (``rfa study recall``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("recall")
