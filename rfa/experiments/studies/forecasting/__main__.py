"""``python -m rfa.experiments.studies.forecasting``: the study's command line (``rfa study forecasting``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("forecasting")
