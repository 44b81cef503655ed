"""What the length_generalization study trains and measures (:mod:`rfa.experiments.studies.length_generalization`: the
study, its command line and its JSON)."""

from __future__ import annotations

import os

import numpy as np

from rfa.data.tokenizers import BOS_ID, PAD_ID
from rfa.experiments.common.seeded import task_run_config, train_seeds
from rfa.experiments.common.spread import Spread
from rfa.experiments.studies.length_generalization.report import METRICS
from rfa.tasks import eval_batches, get_task
from rfa.train import evaluate_model, load_model
from rfa.workdir import ConfigError


def longer_metrics(study, workdir: str) -> dict:
    """The metrics of one trained run (``workdir``) on ``study.longer_task``'s test split (``study.longer_batches``
    batches; 0: all), at ``study.longer_max_length``."""
    model, config, _, _ = load_model(workdir, max_length=study.longer_max_length)
    config.task, config.eval_batches = study.longer_task, study.longer_batches
    return evaluate_model(model, config)


def floors(study, batch_size: int) -> dict:
    """What two rules that learn nothing about sorting score on the longer test split, teacher-forced as the models
    are: ``"repeat the previous symbol"`` (predict the decoder's input token, so the first is always wrong) and
    ``"the majority symbol"`` (the split's most frequent target token, an optimistic floor: it is chosen on the
    split itself). ``{rule: {"accuracy", "sequence_accuracy"}}``, over the examples the models are evaluated on
    (``study.longer_batches`` batches of ``batch_size``; 0: all), per target token, EOS included, as the models'.

    Example:
      >>> floors(study, 32)["repeat the previous symbol"]["accuracy"]  # doctest: +SKIP
      0.672
    """
    task = get_task(study.longer_task)
    batches = eval_batches(
        task,
        data_dir=study.data_dir,
        batch_size=batch_size,
        max_length=study.longer_max_length,
        split=task.test_split,
        max_batches=study.longer_batches or None,
    )
    targets = np.concatenate([np.asarray(batch["targets"]) for batch in batches])
    targets = targets[(targets != PAD_ID).any(-1)]
    weights = targets != PAD_ID
    previous = np.concatenate([np.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)
    symbols, counts = np.unique(targets[weights], return_counts=True)
    predictions = {
        "repeat the previous symbol": previous,
        "the majority symbol": np.full_like(targets, symbols[counts.argmax()]),
    }
    return {
        rule: {
            "accuracy": float((predicted == targets)[weights].mean()),
            "sequence_accuracy": float(((predicted == targets) | ~weights).all(-1).mean()),
        }
        for rule, predicted in predictions.items()
    }


def run(study, workdir: str) -> dict:
    """Trains (or reads back) every (attention, positional) setting with every seed and evaluates each run at the
    longer lengths. Returns ``{"rows", "floors"}``: one row per setting — the
    :func:`rfa.experiments.common.spread.over_seeds` fields, ``longer`` (``{metric: {"mean", "std", "n"}}``) and
    ``longer_runs`` (each seed's ``{"seed", metric: value}``) — and the :func:`floors` of the longer split."""
    if not study.positional:
        raise ConfigError("config.positional names no positional encoding to compare.")
    rows = []
    for attention in study.attention:
        for positional in study.positional:
            config = task_run_config(study.task, attention, study.scale, study.data_dir)
            config.model.positional = positional
            if study.longer_max_length <= config.max_length:
                raise ConfigError(
                    f"config.longer_max_length = {study.longer_max_length} must exceed the training length "
                    f"max_length = {config.max_length} of configs/{study.task}.py."
                )
            cell = os.path.join(workdir, attention, positional)
            row = train_seeds(config, cell, study.seeds)
            longer = [longer_metrics(study, os.path.join(cell, f"seed_{seed}")) for seed in study.seeds]
            row["positional"] = positional
            row["longer"] = {name: Spread.of(m[name] for m in longer).as_dict() for name in METRICS}
            row["longer_runs"] = [
                {"seed": seed, **{name: m[name] for name in METRICS}}
                for seed, m in zip(study.seeds, longer, strict=True)
            ]
            rows.append(row)
    return {"rows": rows, "floors": floors(study, config.batch_size)}
