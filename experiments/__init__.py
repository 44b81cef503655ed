"""rfa's experiments, by family: sweeps and reproductions (``experiments.sweeps``), benchmarks
(``experiments.benchmarks``) and training studies (``experiments.studies``); the general command lines
(``train``, ``decode``, ``prepare_data``, ``mse``, ``reproduce``) sit here, with what they share
(``experiments.cli``) and the report helpers (``experiments.report``). Importing this package imports nothing.
"""
