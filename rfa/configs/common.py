"""What the configs share: variants, the schema of a sweep, the training config of a task.

Every config in this package imports only this module (and ml_collections), so a config never pulls in
the experiments that run it. ``get_config(arg)`` of a config returns a ``ConfigDict`` locked by the
command line that loads it; its variants are chosen by ``arg`` (``rfa/configs/sweeps/performer_fig2.py:quick``).
"""

from __future__ import annotations

import ml_collections

from rfa.workdir import apply_variant

__all__ = ["apply_variant", "seq2seq_config", "sweep_config", "task_config"]


def _kernel_mse(config: ml_collections.ConfigDict) -> None:
    config.repetitions = 1000  # independent projections per cell (Monte Carlo repetitions)
    config.max_relative_error = 0.0  # skip Monte Carlo where its predicted relative error exceeds this (0: never)
    config.geometry = ml_collections.ConfigDict()
    config.geometry.kind = "norm_angle"  # x = l e1, y = l (cos t e1 + sin t e2): |x| = |y| = l at angle t
    config.geometry.norms = ()  # the lengths l
    config.geometry.angles = ()  # the angles t in degrees


def _attention_error(config: ml_collections.ConfigDict) -> None:
    config.length = 4096  # L, sequence length (queries = keys = values)
    config.input_scales = ()  # s: entries of q and k are N(0, s²), v is N(0, 1)
    config.num_seeds = 15  # independent inputs and projections per cell


def _estimator_fit(config: ml_collections.ConfigDict) -> None:
    config.datasets = ()  # query/key sets: "anisotropic" (synthetic), "trained_model" (an attention layer's)
    config.num_vectors = 256  # queries and keys per set (per head for the model)
    config.input_scale = 0.5  # s: the synthetic sets' largest standard deviation per coordinate
    config.anisotropy = 8.0  # ratio of the largest to the smallest standard deviation (synthetic)
    config.pairs_checked = 8  # pairs per cell whose variance Monte Carlo checks
    config.repetitions = 20000  # Monte Carlo draws per checked pair
    config.model = ml_collections.ConfigDict()
    config.model.config = "sort:exact"  # the training config of the trained_model set
    config.model.num_train_steps = 300
    config.model.layer = 0  # encoder layer whose self-attention queries and keys are taken
    config.data_dir = "data"  # TFDS data_dir of the model's task


# The fields of each shipped experiment kind (rfa.experiments.sweeps): a kind of your own adds its fields itself.
_KIND_FIELDS = {"kernel_mse": _kernel_mse, "attention_error": _attention_error, "estimator_fit": _estimator_fit}


def sweep_config(experiment: str) -> ml_collections.ConfigDict:
    """The fields of a sweep of ``experiment`` (an experiment kind of ``rfa.experiments.sweeps``), with defaults;
    configs fill in the values.

    Example:
      >>> config = sweep_config("kernel_mse")
      >>> config.experiment, config.repetitions
      ('kernel_mse', 1000)
    """
    config = ml_collections.ConfigDict()
    config.name = ""  # reproduction name: selects the analysis, figures and published values of the report
    config.experiment = experiment  # the experiment kind: "kernel_mse", "attention_error", "estimator_fit", ...
    config.modules = ()  # modules imported first (from the current directory too): your estimators, reproductions
    config.estimators = ()  # registered estimator names
    config.feature_params = ml_collections.ConfigDict()  # fixed parameters per estimator, e.g. {"gerf": {"A": -0.1}}
    config.projections = ("iid",)  # projection kinds: "iid", "orthogonal", "simplex"
    config.num_features = ()  # the sweep over m, the number of random vectors
    config.dim = 16  # d, the input dimension
    config.seed = 0  # every random draw derives from this seed and the cell's parameters
    config.batch_elements = 2**22  # largest number of feature values held in memory at once
    if experiment in _KIND_FIELDS:
        _KIND_FIELDS[experiment](config)
    return config


def task_config(task: str, arg: str | None, *, scales: dict[str, dict] | None = None, **fields):
    """The training config of ``task`` with its ``fields`` (dotted names) and the variant
    ``arg = "<attention>[,<scale>]"`` (``rfa.train.config.task_config``).

    Example:
      >>> task_config("sort", "positive,quick", max_length=40).attention.kind
      'positive'
    """
    from rfa.train.config import task_config as build  # the training stack, only for training configs

    return build(task, arg, scales=scales, **fields)


SHORT = {"num_train_steps": 300, "eval_every": 100, "checkpoint_every": 100}
"""The ``short`` scale of the compared tasks (300 steps, not 500-600): the seeded tables of compare_kernels."""


def seq2seq_config(task: str, arg: str | None):
    """The config of an algorithmic seq2seq task (copy, reverse, sort): same model and sizes for all three."""
    return task_config(
        task,
        arg,
        scales={"short": SHORT},
        max_length=40,  # strings of 2-32 letters plus EOS
        batch_size=32,
        num_train_steps=600,
        eval_every=200,
        checkpoint_every=200,
    )
