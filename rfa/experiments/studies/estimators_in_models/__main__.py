"""``python -m rfa.experiments.studies.estimators_in_models``: the study's command line (``rfa study
estimators_in_models``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("estimators_in_models")
