"""rfa's experiments (installed with ``rfa[experiments]``), by family: sweeps and reproductions
(``rfa.experiments.sweeps``), benchmarks (``rfa.experiments.benchmarks``) and training studies
(``rfa.experiments.studies``); the general command lines (``train``, ``decode``, ``prepare_data``, ``sweep``,
``reproduce``, ``report``, ``tables``) sit here, with what they share (``rfa.experiments.cli``) and the report
helpers (``rfa.experiments.report``). The ``rfa`` console script runs them all (:mod:`rfa.experiments.command`).
Importing this package imports nothing.
"""
