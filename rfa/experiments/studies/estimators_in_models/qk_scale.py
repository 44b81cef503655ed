"""The q/k scale: how each estimator's error at a model's own attention sites changes when the sites' queries and
keys are scaled, part of :mod:`rfa.experiments.studies.estimators_in_models.measure` (same config, same command).

Softmax attention at a site depends on its queries and keys through the logits ``qᵀk/√d``; multiplying both by s
multiplies the logits by s² (a sharper or flatter attention) and the random-feature variances grow with it: for
positive features ``Var/κ² = (e^{|x+y|²} − 1)/m`` with ``x, y`` scaled by s (Choromanski et al., "Rethinking
Attention with Performers", ICLR 2021; FAVOR++: Likhosherstov et al., NeurIPS 2022). Training changes a model's
scale, so the study's init-against-trained comparison mixes the scale with everything else training does. Here
the scale is the only thing that changes: every model, state and seed of the study is prepared as there
(:func:`~rfa.experiments.studies.estimators_in_models.measure.prepare`), each site's q and k (and its calibration
batches')
are multiplied by each s of ``config.qk_scales``, and every estimator at the study's largest m is measured on
them, each site isolated (:func:`~rfa.experiments.studies.estimators_in_models.measure.measure_sites`): the layer error
against softmax on the same scaled inputs, and the closed-form and measured relative variance. Each record also
keeps the standard deviation of the scaled logits ``qᵀk/√d`` over valid query-key pairs (s = 1: the model's own).
"""

from __future__ import annotations

import functools
import itertools
import math
import os

import jax
import numpy as np
from matplotlib.figure import Figure

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.spread import Spread
from rfa.experiments.studies.estimators_in_models.measure import (
    MEASURE_FIELDS,
    by_cell,
    cells,
    check,
    fits_sites,
    kept,
    measure_sites,
    prepare,
    valid_pairs,
)
from rfa.experiments.studies.estimators_in_models.report import label, plot_lines
from rfa.workdir import ConfigError

SCALE_FIELDS = (*MEASURE_FIELDS, "qk_scales")  # what the records of one model, state and seed depend on


def scaled(site: tuple, s: float) -> tuple:
    """A site's ``(q, k, v, key_mask, causal)`` with q and k multiplied by ``s``.

    Example:
      >>> q, k, v = np.ones((1, 2, 1, 4)), np.ones((1, 2, 1, 4)), np.ones((1, 2, 1, 4))
      >>> [float(a.max()) for a in scaled((q, k, v, np.ones((1, 2), bool), False), 0.5)[:3]]
      [0.5, 0.5, 1.0]
    """
    q, k, *rest = site
    return (q * s, k * s, *rest)


def logit_std(site: tuple, pairs: int) -> float:
    """The standard deviation of the logits ``qᵀk/√d`` over ``pairs`` valid (query, key) pairs and the heads.

    Example:
      >>> q = np.random.default_rng(0).normal(size=(2, 8, 2, 16))
      >>> site = (q, q, q, np.ones((2, 8), bool), False)
      >>> round(logit_std(scaled(site, 2.0), 64) / logit_std(site, 64), 6)  # the logits scale by s²
      4.0
    """
    q, k, _, key_mask, _ = site
    rows, i, j = valid_pairs(np.asarray(key_mask), pairs)
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    return float(np.std(np.sum(q[rows, i] * k[rows, j], -1) / math.sqrt(q.shape[-1])))


def sweep(study, model_name: str, state: str, seed: int, workdir: str) -> list[dict]:
    """One record per (estimator, fit, s) of one model, state and seed: the layer error, the variances and the
    logits' spread, each the mean over the sites."""
    prepared = prepare(study, model_name, state, seed, workdir)
    num_features = max(study.num_features)
    records = []
    for (estimator, _, fit), s in itertools.product(
        [cell for cell in cells(study) if cell[1] == num_features], study.qk_scales
    ):
        if not fits_sites(fit, prepared.sites):
            continue
        sites = [scaled(site, s) for site in prepared.sites]
        calibration_sites = [scaled(site, s) for site in prepared.calibration_sites]
        key = jax.random.fold_in(jax.random.key(seed), num_features)  # the study's features at s = 1
        errors, closed, measured = measure_sites(study, estimator, num_features, fit, sites, calibration_sites, key)
        records.append(
            {
                "model": model_name,
                "state": state,
                "seed": seed,
                "estimator": estimator,
                "num_features": num_features,
                "fit": fit or "-",
                "qk_scale": s,
                "layer_error": float(np.mean(errors)),
                "closed_form_variance": float(np.mean(closed)),
                "measured_variance": float(np.mean(measured)),
                "logit_std": float(np.mean([logit_std(site, study.variance_pairs) for site in sites])),
            }
        )
    return records


def run(study, workdir: str) -> list[dict]:
    """Sweeps every model, state and seed of ``study`` (kept in ``<workdir>/measures/<model>_<state>_seed<seed>
    _qk_scale.json``; a stopped sweep resumes); one row per (model, state, estimator, fit, s) with the measures
    as :class:`rfa.experiments.common.spread.Spread` dicts over the seeds, and the per-seed ``records``."""
    check(study)
    if not study.qk_scales or any(s <= 0 for s in study.qk_scales):
        raise ConfigError(f"config.qk_scales must be positive factors, got {tuple(study.qk_scales)}.")
    records = []
    for name, state, seed in itertools.product(study.models, study.states, study.seeds):
        path = os.path.join(workdir, "measures", f"{name}_{state}_seed{seed}_qk_scale.json")
        records += kept(study, SCALE_FIELDS, path, functools.partial(sweep, study, name, state, seed, workdir))
    rows = []
    for row, group in by_cell(records, ("model", "state", "estimator", "fit", "qk_scale")):
        for name in ("layer_error", "closed_form_variance", "measured_variance", "logit_std"):
            row[name] = Spread.of(r[name] for r in group).as_dict()
        row["num_features"], row["records"] = group[0]["num_features"], group
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown of :func:`run`'s rows: the layer error per s (a column each) for every model, state and
    estimator; the logits' spread per model, state and s; and per model and state, the lowest error at each s."""
    scales = sorted({r["qk_scale"] for r in rows})
    cell = {(r["model"], r["state"], label(r), r["qk_scale"]): Spread(**r["layer_error"]) for r in rows}
    lines = [
        [model, state, name, str(rows[0]["num_features"])]
        + [cell[model, state, name, s].cell("{:.3g}") if (model, state, name, s) in cell else "-" for s in scales]
        for model, state, name in dict.fromkeys((r["model"], r["state"], label(r)) for r in rows)
    ]
    errors = markdown_table(["model", "state", "estimator", "m", *(f"layer error, s = {s:g}" for s in scales)], lines)
    spread = {(r["model"], r["state"], r["qk_scale"]): Spread(**r["logit_std"]) for r in rows}
    logits = markdown_table(
        ["model", "state", *(f"std of qᵀk/√d, s = {s:g}" for s in scales)],
        [
            [model, state, *(spread[model, state, s].cell("{:.2f}") for s in scales)]
            for model, state in dict.fromkeys((r["model"], r["state"]) for r in rows)
        ],
    )
    return errors + "\n\n" + logits + "\n\n" + "\n".join(verdicts(rows))


SUMMARY = (("positive", "-"), ("oprf", "calibrated"), ("aderf", "calibrated"), ("trig", "-"))


def summary(rows: list[dict]) -> str:
    """Markdown: per model and state, the mean layer error of positive features, calibrated OPRF and ADERF and
    trig at every s (``a / b / c``), the compact form of :func:`table`'s first table."""
    scales = sorted({r["qk_scale"] for r in rows})
    mean = {(r["model"], r["state"], r["estimator"], r["fit"], r["qk_scale"]): r["layer_error"]["mean"] for r in rows}
    number = lambda x: f"{x:.2f}" if x < 10 else f"{x:.0f}"  # noqa: E731
    lines = [
        [f"{model}, {state}", *(" / ".join(number(mean[model, state, e, f, s]) for s in scales) for e, f in SUMMARY)]
        for model, state in dict.fromkeys((r["model"], r["state"]) for r in rows)
    ]
    header = [
        "model, state",
        *(f"{e}{'' if f == '-' else f' ({f})'}, s = {' / '.join(f'{s:g}' for s in scales)}" for e, f in SUMMARY),
    ]
    return markdown_table(header, lines)


def verdicts(rows: list[dict]) -> list[str]:
    """Per model and state: the estimator of the lowest layer error at each s."""
    lines = []
    for (model, state), group in itertools.groupby(rows, key=lambda r: (r["model"], r["state"])):
        group = list(group)
        best = []
        for s in sorted({r["qk_scale"] for r in group}):
            winner = min((r for r in group if r["qk_scale"] == s), key=lambda r: r["layer_error"]["mean"])
            best.append(f"s = {s:g}: {label(winner)} {Spread(**winner['layer_error']).cell('{:.3g}')}")
        lines.append(f"- {model}, {state}, lowest layer error at " + "; ".join(best) + ".")
    return lines


def plot(rows: list[dict], path: str) -> Figure:
    """Layer error against s, one panel per (model, state), one line per (estimator, fit) with its seed range."""
    return plot_lines(rows, path, x="qk_scale", measure="layer_error", xlabel="q/k scale s")
