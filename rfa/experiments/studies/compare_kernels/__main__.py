"""``python -m rfa.experiments.studies.compare_kernels``: the study's command line (``rfa study compare_kernels``)."""

from rfa.experiments import studies

if __name__ == "__main__":
    studies.run("compare_kernels")
