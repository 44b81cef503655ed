"""Sweeps: estimator experiments over feature counts, projections and inputs, and the reproductions built on them.

An experiment kind (:mod:`~rfa.experiments.sweeps.kernel_mse`, :mod:`~rfa.experiments.sweeps.attention_error`,
:mod:`~rfa.experiments.sweeps.estimator_fit`) says what a cell measures; a reproduction (one module each, e.g.
:mod:`~rfa.experiments.sweeps.performer_fig2`) holds its published values and analysis. Both are one registration
in :mod:`~rfa.experiments.sweeps.registry`; :func:`rfa.experiments.sweeps.runner.run` runs any sweep config.

Importing any module of this package registers the shipped kinds and reproductions first (through
:mod:`~rfa.experiments.sweeps.catalog`), so a user's module that registers a reproduction of a shipped kind finds it.
"""

from rfa.experiments.sweeps import catalog  # noqa: F401 (registers the shipped kinds and reproductions)
