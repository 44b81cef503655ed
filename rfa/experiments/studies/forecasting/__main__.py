from rfa.experiments import studies
from rfa.experiments.studies.forecasting import __doc__  # noqa: F401 (--help shows the study's description)

if __name__ == "__main__":
    studies.run("forecasting")
