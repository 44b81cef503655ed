"""What the recall study trains and measures (:mod:`rfa.experiments.studies.recall`: the study, its
command line and its JSON)."""

from __future__ import annotations

import os

import jax

from rfa.experiments.common.seeded import train_seeds
from rfa.experiments.common.study_settings import feature_counts, settings, training_config
from rfa.tasks import get_task
from rfa.train.config import build_model


def state_bytes(config) -> int:
    """Bytes of one layer's decode cache for one sequence of ``config.max_length`` tokens, averaged over the layers
    (a hybrid stack's differ; shapes only: nothing is allocated). Exact attention: its keys, values and their mask;
    kernelized: the recurrent state of every head; the delta rule: its state and the convolution's last inputs; a
    sliding window: its window's keys and values."""
    model = build_model(config, get_task(config.task))
    caches = jax.eval_shape(lambda: model.init_cache(1))
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(caches)) / len(caches))


def run(study, workdir: str) -> list[dict]:
    """Trains (or reads back) every setting with every seed; one row per setting, with its state size.

    With ``study.learning_rates``, a setting's seeds train at the rate of the highest validation accuracy among
    runs with ``study.sweep_seed``, one per rate (:func:`select_rate`); the row records ``learning_rate``, ``sweep``
    (``{rate: validation accuracy}``) and ``swept_at`` (the m of the sweep). The sweep is per setting, or with
    ``study.sweep_per_kind`` once per kind, at its middle feature count, whose rate then serves every m of the kind.
    The test split is read only for the rate kept. A kind in ``study.learning_rate_of`` sweeps nothing: it trains at
    the rate given (chosen elsewhere, as by its sweep at another length), and its row records ``sweep`` ``{}`` and
    ``rate_from`` (``study.rate_from``: where the rate was chosen).
    """
    rows, chosen = [], {}
    for attention, m in settings(study):
        config = training_config(study, attention, m)
        sweep, swept_at, given = {}, m, attention in study.learning_rate_of
        if given:
            config.optimizer.learning_rate = study.learning_rate_of[attention]
        elif study.learning_rates:
            counts = feature_counts(study, attention)
            swept_at = counts[len(counts) // 2] if study.sweep_per_kind else m
            if (attention, swept_at) not in chosen:
                swept = training_config(study, attention, swept_at)
                chosen[attention, swept_at] = select_rate(
                    study, swept, os.path.join(workdir, _name(attention, swept_at))
                )
            config.optimizer.learning_rate, sweep = chosen[attention, swept_at]
        name = _name(attention, m)
        if study.learning_rates or given:
            name = os.path.join(name, _rate_dir(config.optimizer.learning_rate))
        row = train_seeds(config, os.path.join(workdir, name), study.seeds)
        rows.append(
            row
            | {
                "state_bytes": state_bytes(config),
                "length": config.max_length,
                "num_pairs": config.recall.num_pairs,
                "vocab_size": config.recall.vocab_size,
                "learning_rate": config.optimizer.learning_rate,
                "sweep": sweep,
                "swept_at": swept_at,
                **({"rate_from": study.rate_from} if given else {}),
            }
        )
    return rows


def _name(attention: str, m: int | None) -> str:
    return attention if m is None else f"{attention}_m{m}"


def _rate_dir(rate: float) -> str:
    return f"lr_{rate:g}"


def select_rate(study, config, workdir: str) -> tuple[float, dict]:
    """The learning rate of ``study.learning_rates`` whose run of ``config`` with ``study.sweep_seed`` reaches the
    highest validation accuracy (in ``<workdir>/lr_<rate>/seed_<sweep_seed>``, where the seeds of that rate train
    too), and ``{rate: validation accuracy}``."""
    sweep = {}
    for rate in study.learning_rates:
        candidate = config.copy_and_resolve_references()
        candidate.optimizer.learning_rate = rate
        row = train_seeds(candidate, os.path.join(workdir, _rate_dir(rate)), (study.sweep_seed,))
        sweep[f"{rate:g}"] = row["validation"]["accuracy"]["mean"]
    return max(study.learning_rates, key=lambda rate: sweep[f"{rate:g}"]), sweep
