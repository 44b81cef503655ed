"""Training studies: commands that train several models and compare them (``python -m
experiments.studies.compare_kernels``, ``.forecast``, ``.recall``, ``.distill``).
"""
