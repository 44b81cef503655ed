"""Benchmarks: commands that time and measure rfa (attention, decoding, sweeps, model scaling) and write JSON and
figures; each is a command (``rfa benchmark attention``, ``python -m rfa.experiments.benchmarks.attention``).

One package per benchmark: its docstring says what it measures (``rfa benchmark`` lists the first lines), its
``__main__.py`` holds its flags, its measurement and its command line, and its ``report.py`` (where a results page
quotes it) renders its table and figure from its JSON alone, without JAX or flags, so that ``rfa tables`` renders
them again. What the benchmarks share is :mod:`rfa.experiments.benchmarks.guard` (the speed guard against the
committed figures) and, with the studies, :mod:`rfa.experiments.common.timing`. Importing this package imports
nothing.
"""
