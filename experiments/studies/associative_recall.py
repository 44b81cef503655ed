"""Associative recall against recurrent state size: which attention kind recalls most per byte of decode state.

The work of ``python -m experiments.studies.recall --config configs/recall.py --workdir workdir/recall``
(:mod:`experiments.studies.recall` is its command line).

Zoology (Arora et al., 2023) and Based (Arora et al., ICML 2024) tell linear-attention feature maps apart by
multi-query associative recall (MQAR, :mod:`rfa.data.mqar`) against the size of the recurrent state a decoder
carries. Every kind of ``config.attention`` trains ``configs/<config.task>.py:<attention>[,<scale>]`` once per
seed of ``config.seeds``; kinds whose map takes a feature count (random features, Hedgehog, gated RFA) train at
each m of ``config.num_features``, the others (exact, elu, relu, taylor) once. Each setting's state size is the
bytes of one layer's decode cache for one sequence at the config's length (exact attention: its keys and values,
which grow with the length; kernelized: the state ``Σ_j φ(k_j)[v_j, 1]ᵀ`` of every head, which does not), read
from the model's own ``init_cache``. Test accuracy at query positions is reported as mean ± standard deviation
over the seeds, compared with exact attention (:func:`experiments.spread.versus`). The command writes the JSON,
the table beside it (``.md``) and the figure (``.png``: accuracy against state bytes, log x, one curve per kind).
"""

from __future__ import annotations

import os

import jax
from matplotlib.figure import Figure

from experiments.report import markdown_table
from experiments.spread import metric, versus
from experiments.studies.seeded import task_run_config, train_seeds
from rfa.models.cores import attention_kinds, uses_num_features
from rfa.tasks import get_task
from rfa.train.config import build_model


def settings(study) -> list[tuple[str, int | None]]:
    """``(attention, m)`` of every setting: each feature count for kinds that take one, None for the others."""
    return [(attention, m) for attention in study.attention
            for m in (study.num_features if _takes_features(study, attention) else (None,))]  # fmt: skip


def _takes_features(study, attention: str) -> bool:
    kind = training_config(study, attention, None).attention.kind
    return kind in attention_kinds() and uses_num_features(kind)


def training_config(study, attention: str, num_features: int | None):
    """The training config of one setting: ``configs/<task>.py:<attention>[,<scale>]`` with m set."""
    config = task_run_config(study.task, attention, study.scale, study.data_dir)
    if num_features is not None:
        config.attention.num_features = num_features
    return config


def state_bytes(config) -> int:
    """Bytes of one layer's decode cache for one sequence of ``config.max_length`` tokens (shapes only: nothing is
    allocated). Exact attention: its keys, values and their mask; kernelized: the recurrent state of every head."""
    model = build_model(config, get_task(config.task))
    caches = jax.eval_shape(lambda: model.init_cache(1))
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(caches[0])))


def run(study, workdir: str) -> list[dict]:
    """Trains (or reads back) every setting with every seed; one row per setting, with its state size."""
    rows = []
    for attention, m in settings(study):
        config = training_config(study, attention, m)
        name = attention if m is None else f"{attention}_m{m}"
        row = train_seeds(config, os.path.join(workdir, name), study.seeds)
        rows.append(row | {"state_bytes": state_bytes(config), "length": config.max_length,
                           "num_pairs": config.recall.num_pairs, "vocab_size": config.recall.vocab_size})  # fmt: skip
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: one row per setting, by kind and state size; test accuracy against exact attention's."""
    reference = next((metric(r, "accuracy") for r in rows if r["attention"] == "exact"), None)
    lines = []
    for r in rows:
        accuracy = metric(r, "accuracy")
        verdict = (
            "-"
            if reference is None or r["attention"] == "exact"
            else versus(accuracy, reference, higher_is_better=True)
        )
        m = "-" if r["num_features"] is None else str(r["num_features"])
        lines.append([r["attention"], m, f"{r['state_bytes'] / 1024:.1f}", str(len(r["seeds"])),
                      accuracy.cell("{:.3f}"), verdict])  # fmt: skip
    return markdown_table(["attention", "m", "state per layer (KiB)", "seeds", "test accuracy", "vs exact"], lines)


def plot(rows: list[dict], path: str) -> None:
    """Test accuracy (mean, bars: standard deviation over seeds) against state bytes per layer, one curve per kind."""
    figure = Figure(figsize=(6.4, 4.2))
    axis = figure.subplots()
    for index, attention in enumerate(dict.fromkeys(r["attention"] for r in rows)):
        points = sorted((r["state_bytes"], metric(r, "accuracy")) for r in rows if r["attention"] == attention)
        x = [size for size, _ in points]
        style = {"marker": "o", "capsize": 3, "linestyle": "-" if len(points) > 1 else "none"}
        axis.errorbar(x, [s.mean for _, s in points], yerr=[s.std for _, s in points], label=attention,
                      color=f"C{index % 10}", **style)  # fmt: skip
    first = rows[0]
    axis.set(xscale="log", xlabel="decode state per layer (bytes, one sequence)", ylabel="test accuracy (queries)",
             title=f"MQAR: {first['num_pairs']} pairs, length {first['length']}, vocabulary {first['vocab_size']}",
             ylim=(-0.02, 1.02))  # fmt: skip
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
