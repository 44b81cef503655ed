from rfa.experiments import studies
from rfa.experiments.studies.estimators_in_models import __doc__  # noqa: F401 (--help shows the study's description)

if __name__ == "__main__":
    studies.run("estimators_in_models")
