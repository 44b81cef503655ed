"""The settings a study trains, each as its training config: what the studies train and ``rfa benchmark train_step``
times, built in one place so that the benchmark times the very configs the studies train.

- the kernel comparison (:mod:`rfa.experiments.studies.compare_kernels`): every (task, attention) pair of
  :func:`pairs`, its config :func:`pair_config`;
- associative recall (:mod:`rfa.experiments.studies.recall`): every (attention, m) of :func:`settings`, its config
  :func:`training_config`.
"""

from __future__ import annotations

from rfa.experiments.common.seeded import task_run_config
from rfa.train.results import recorded_num_features


def pairs(comparison) -> list[tuple[str, str]]:
    """The (task, attention) pairs to train: every task with every attention, less ``comparison.skip``."""
    skip = {tuple(pair) for pair in comparison.skip}
    return [
        (task, attention)
        for task in comparison.tasks
        for attention in comparison.attention
        if (task, attention) not in skip
    ]


def pair_config(comparison, task: str, attention: str):
    """The training config of one pair of the kernel comparison: ``tasks/<task>.py:<attention>[,<scale>]`` at the
    comparison's scale and data_dir, its m replaced by ``comparison.num_features_of[attention]`` where given."""
    config = task_run_config(task, attention, comparison.scale, comparison.data_dir)
    config.attention.num_features = comparison.num_features_of.get(attention, config.attention.num_features)
    return config


def settings(study) -> list[tuple[str, int | None]]:
    """``(attention, m)`` of every setting: each feature count for kinds that take one, None for the others."""
    return [(attention, m) for attention in study.attention for m in feature_counts(study, attention)]


def feature_counts(study, attention: str) -> tuple:
    """The m of ``attention``'s settings: ``study.num_features_of[attention]`` where given, else
    ``study.num_features``; ``(None,)`` for a kind without a feature count."""
    if not _takes_features(study, attention):
        return (None,)
    return tuple(study.num_features_of.get(attention, study.num_features))


def _takes_features(study, attention: str) -> bool:
    return recorded_num_features(training_config(study, attention, None).attention) is not None


def training_config(study, attention: str, num_features: int | None):
    """The training config of one setting: ``tasks/<task>.py:<attention>[,<scale>]`` with m set, and the decoder's
    layer count of ``study.num_layers_of[attention]`` where given."""
    config = task_run_config(study.task, attention, study.scale, study.data_dir)
    config.model.num_decoder_layers = study.num_layers_of.get(attention, config.model.num_decoder_layers)
    if num_features is not None:
        config.attention.num_features = num_features
    return config
