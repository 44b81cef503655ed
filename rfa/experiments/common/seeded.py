"""One training setting over several seeds: every comparison of attention kinds trains each cell this way."""

from __future__ import annotations

import os

import ml_collections

from rfa.configs import load_task
from rfa.experiments.common.spread import over_seeds
from rfa.train import train_and_evaluate
from rfa.workdir import ConfigError


def task_run_config(task: str, attention: str, scale: str, data_dir: str) -> ml_collections.ConfigDict:
    """The training config ``tasks/<task>.py:<attention>[,<scale>]`` (:func:`rfa.configs.load_task`) (``scale`` "":
    the config's own) reading
    data from ``data_dir``: one cell of a study.

    Example:
      >>> task_run_config("sort", "positive", "quick", "data").num_train_steps
      12
    """
    config = load_task(task, f"{attention},{scale}" if scale else attention)
    config.data_dir = data_dir
    return config


def checked_seeds(seeds) -> tuple[int, ...]:
    """``config.seeds`` as a tuple, or a :class:`rfa.workdir.ConfigError` unless they are distinct and at least one.

    Example:
      >>> checked_seeds([0, 1, 2])
      (0, 1, 2)
    """
    seeds = tuple(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"config.seeds must be distinct seeds, at least one; got {seeds}.")
    return seeds


def train_seeds(config: ml_collections.ConfigDict, workdir: str, seeds) -> dict:
    """Trains ``config`` once per seed in ``<workdir>/seed_<seed>`` (a finished run is read back, an interrupted one
    resumes) and returns :func:`rfa.experiments.common.spread.over_seeds` of the runs.

    The seed sets initialization, data order, dropout and projection redraws (``config.seed``).

    Example:
      >>> row = train_seeds(config, "workdir/train/sort/positive", (0, 1, 2))  # doctest: +SKIP
      >>> row["test"]["accuracy"]  # doctest: +SKIP
      {'mean': 0.95, 'std': 0.004, 'n': 3}
    """
    runs = []
    for seed in checked_seeds(seeds):
        seeded = config.copy_and_resolve_references()
        seeded.seed = seed
        runs.append(train_and_evaluate(seeded, os.path.join(workdir, f"seed_{seed}")))
    return over_seeds(runs)
