"""The attention_error experiment: the output error of kernelized attention against exact attention.

Each cell is one (estimator, projection kind, m, input scale s); its record holds the mean over
``config.num_seeds`` seeds of the output MSE against exact softmax attention, on q, k ~ N(0, s²) and
v ~ N(0, 1) of length ``config.length``, beside the MSE of the "mean of V" output: random inputs give
near-uniform attention, so an estimator is useful only below it (Performer's Fig. 4 setting).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

import rfa
from rfa.experiments.common.report import Analysis, fmt, image_link, log_m_axis, markdown_table, save_figure, select
from rfa.experiments.sweep_framework import config_checks
from rfa.experiments.sweep_framework.cells import Cell, estimator_params, group_seed
from rfa.experiments.sweep_framework.registry import ExperimentKind, register_experiment_kind
from rfa.workdir import ConfigError

PROJECTION_STYLES = {"iid": "o--", "orthogonal": "s-", "simplex": "^:"}  # marker and line of each row coupling


def check(config) -> None:
    config_checks.positive_int(config.length, "config.length")
    config_checks.positive_int(config.num_seeds, "config.num_seeds")
    config_checks.sequence(config.input_scales, "input_scales", config_checks.positive, "input scale")


def check_estimator(config, fm) -> None:
    if fm.kernel not in ("softmax", None):
        raise ConfigError(
            f"config.estimators: {fm.name!r} estimates the {fm.kernel} kernel; attention_error compares against "
            "softmax attention, so it needs a softmax-kernel estimator or a deterministic map."
        )


def points(config) -> list[tuple]:
    return [(("input_scale", float(s)),) for s in config.input_scales]


def attention_inputs(config, input_scale: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``q, k ~ N(0, s²)`` and ``v ~ N(0, 1)`` for every seed: ``[seeds, L, 1, d]`` each (one head)."""
    key = jax.random.key(group_seed(config.seed, ("inputs", float(input_scale))))
    shape = (config.num_seeds, config.length, 1, config.dim)
    q_key, k_key, v_key = jax.random.split(key, 3)
    return (
        input_scale * jax.random.normal(q_key, shape),
        input_scale * jax.random.normal(k_key, shape),
        jax.random.normal(v_key, shape),
    )


@jax.jit
def _exact_outputs(q, k, v):
    """Exact attention of every seed, one at a time (each holds an L x L matrix)."""
    return jax.lax.map(lambda qkv: rfa.softmax_attention(*qkv), (q, k, v))


@functools.partial(jax.jit, static_argnames=("estimator", "kind", "num_features", "params"))
def _attention_errors(keys, q, k, v, exact, *, estimator, kind, num_features, params):
    """Per seed: MSE of the kernelized output and of the "mean of V" output against exact attention."""

    def one(key, q, k, v, exact):
        W, sampled = rfa.estimator(estimator).draw(key, num_features, q.shape[-1], projection_kind=kind)
        feature_params = {**dict(params), **sampled}
        out = rfa.kernelized_attention(q, k, v, estimator=estimator, projection=W, feature_params=feature_params)
        baseline = jnp.broadcast_to(jnp.mean(v, axis=0), v.shape)
        return jnp.mean((out - exact) ** 2), jnp.mean((baseline - exact) ** 2)

    return jax.vmap(one)(keys, q, k, v, exact)


class ScaledInputs:
    """Inputs and exact outputs per input scale, made once per run and shared by every group."""

    def __init__(self, config):
        self.config = config
        self._cache = {}

    def __call__(self, input_scale: float):
        if input_scale not in self._cache:
            q, k, v = attention_inputs(self.config, input_scale)
            self._cache[input_scale] = (q, k, v, _exact_outputs(q, k, v))
        return self._cache[input_scale]


def measure(
    config, cell_group: list[Cell], inputs: ScaledInputs, done=lambda cell: False
) -> Iterator[tuple[Cell, dict]]:
    """Attention-output MSE over ``config.num_seeds`` seeds for one (estimator, projection, m) group."""
    estimator, kind, m = cell_group[0].group
    base_key = jax.random.key(group_seed(config.seed, cell_group[0].group))
    keys = jax.vmap(lambda s: jax.random.fold_in(base_key, s))(jnp.arange(config.num_seeds))
    values_per_seed = config.length * rfa.estimator(estimator).num_outputs(m, config.dim) * 2
    seeds_per_batch = min(config.num_seeds, max(1, config.batch_elements // values_per_seed))
    for cell in cell_group:
        if done(cell):
            continue
        began = time.perf_counter()
        q, k, v, exact = inputs(dict(cell.point)["input_scale"])
        errors, baselines = [], []
        for first in range(0, config.num_seeds, seeds_per_batch):
            # Pad the last batch with the first seeds so every batch has one shape (one compilation).
            index = np.arange(first, first + seeds_per_batch) % config.num_seeds
            error, baseline = _attention_errors(
                keys[index],
                q[index],
                k[index],
                v[index],
                exact[index],
                estimator=estimator,
                kind=kind,
                num_features=m,
                params=tuple(estimator_params(config, estimator).items()),
            )
            keep = min(seeds_per_batch, config.num_seeds - first)
            errors.append(np.asarray(error, np.float64)[:keep])
            baselines.append(np.asarray(baseline, np.float64)[:keep])
        errors, baselines = np.concatenate(errors), np.concatenate(baselines)
        yield (
            cell,
            {
                "mse": float(errors.mean()),
                "standard_error": float(errors.std(ddof=1) / math.sqrt(len(errors))) if len(errors) > 1 else math.nan,
                "mean_of_v_mse": float(baselines.mean()),
                "seeds": len(errors),
                "seconds": time.perf_counter() - began,
            },
        )


def analyze(config, records: list[dict], workdir: str) -> Analysis:
    """Attention-output MSE vs m per input scale, with the "mean of V" baseline."""
    scales = sorted({r["input_scale"] for r in records})
    fig = Figure(layout="constrained", figsize=(4.5 * len(scales) + 2.2, 4.2))
    axes = fig.subplots(1, len(scales), squeeze=False)
    for scale, ax in zip(scales, axes[0], strict=True):
        for i, estimator in enumerate(config.estimators):
            for kind in config.projections:
                style = PROJECTION_STYLES.get(kind, "x-.")
                cells = sorted(
                    select(records, estimator=estimator, projection=kind, input_scale=scale), key=lambda r: r["m"]
                )
                if cells:
                    ax.errorbar(
                        [r["m"] for r in cells],
                        [r["mse"] for r in cells],
                        yerr=[r["standard_error"] for r in cells],
                        fmt=style,
                        color=f"C{i}",
                        ms=4,
                        label=f"{estimator} ({kind})",
                    )
        ax.axhline(select(records, input_scale=scale)[0]["mean_of_v_mse"], color="k", ls=":", label="mean of V")
        log_m_axis(ax, config.num_features)
        ax.set(yscale="log", ylabel="output MSE", title=f"q, k ~ N(0, {scale:g}²)")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside right upper", fontsize=7)
    figure = save_figure(fig, workdir, "attention_error.png")
    rows = [
        [r["estimator"], r["projection"], fmt(r["input_scale"]), fmt(r["m"]), fmt(r["mse"]), fmt(r["standard_error"])]
        + [fmt(r["mean_of_v_mse"])]
        for r in records
    ]
    sections = [
        f"## Attention output MSE vs m (L = {config.length}, d = {config.dim}, {config.num_seeds} seeds)\n\n"
        'Random inputs give near-uniform attention, so the output of plain averaging ("mean of V") is '
        "drawn beside the estimators: an estimator is useful only below it.",
        image_link(figure),
        markdown_table(["estimator", "W", "input scale", "m", "MSE", "SE", "mean of V"], rows),
    ]
    return Analysis(None, sections)


register_experiment_kind(
    ExperimentKind(
        "attention_error",
        check,
        check_estimator,
        points,
        measure,
        analyze,
        context=lambda config, workdir: ScaledInputs(config),
    )
)
