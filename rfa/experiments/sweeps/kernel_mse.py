"""The kernel_mse experiment: closed-form and Monte Carlo MSE of kernel estimates at pairs (x, y).

Each cell is one (estimator, projection kind, m, ``|x| = |y| = l``, angle t) of a sweep; its record holds the
exact kernel, the closed-form MSE (NaN where none is known), a published bound where one exists, and the
Monte Carlo MSE over ``config.repetitions`` independent projections with its standard error. Monte Carlo is
jitted and vmapped over repetitions and sweep points. Repetition ``r`` of a group draws its projection from
``fold_in(key(group seed), r)``, so a cell's numbers depend on the seed and the cell only — not on the batch
size, on the other cells or on an interrupted earlier run. Repetitions are processed in batches of at most
``config.batch_elements`` feature values, so memory stays bounded for any repetition count.

Relative errors ``U = K̂/K - 1`` are accumulated (``K`` the exact kernel), which keeps the moments in float32
range on the device; ``MSE = K² E[U²]`` and its standard error are formed in float64. The generic analysis
(:func:`kernel_agreement`) holds every cell's Monte Carlo to its closed form.
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
from rfa.experiments.common.report import Analysis, Verdict, fmt, image_link, markdown_table, save_figure, select
from rfa.experiments.sweep_framework import config_checks
from rfa.experiments.sweep_framework.cells import Cell, estimator_params, group_seed
from rfa.experiments.sweep_framework.registry import ExperimentKind, register_experiment_kind
from rfa.random_features.kernels import KERNELS
from rfa.workdir import ConfigError

AGREEMENT_SIGMAS = 4.0
MEANINGFUL_ERROR = 0.15  # largest predicted relative error of a Monte Carlo MSE that is tested (4 SE = 60%)
GEOMETRIES = ("norm_angle",)


def check(config) -> None:
    """The kernel_mse fields: repetitions, the geometry of the pairs, ``max_relative_error``."""
    config_checks.positive_int(config.repetitions, "config.repetitions")
    if config.repetitions < 2:
        raise ConfigError(f"config.repetitions must be >= 2 for a standard error, got {config.repetitions}.")
    if config.geometry.kind not in GEOMETRIES:
        raise ConfigError(f"config.geometry.kind must be one of {list(GEOMETRIES)}, got {config.geometry.kind!r}.")
    config_checks.sequence(config.geometry.norms, "geometry.norms", config_checks.positive, "norm")
    config_checks.sequence(config.geometry.angles, "geometry.angles", config_checks.finite, "angle")
    if not config.max_relative_error >= 0:
        value = config.max_relative_error
        raise ConfigError(f"config.max_relative_error must be >= 0 (0: never skip), got {value}.")
    if config.dim < 2:
        raise ConfigError(f"config.dim must be >= 2 to place two vectors at an angle, got {config.dim}.")


def check_estimator(config, fm) -> None:
    if fm.kernel is None:
        raise ConfigError(
            f"config.estimators: {fm.name!r} estimates no kernel (Estimator.kernel is None), so it has no kernel "
            "MSE; compare it in the attention_error experiment."
        )


def points(config) -> list[tuple]:
    """``(("norm", l), ("angle", t))`` for every norm and angle of ``config.geometry``."""
    geometry = config.geometry
    return [(("norm", float(n)), ("angle", float(a))) for n in geometry.norms for a in geometry.angles]


def pair_vectors(norms, angles, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``x = l e1`` and ``y = l (cos t e1 + sin t e2)`` for norms l and angles t in degrees (broadcast).

    Returns float32 ``x, y`` of shape ``[P, d]``: ``|x| = |y| = l`` at angle t, the geometry of
    Performer's Fig. 2 and of every kernel sweep here.
    """
    norms, radians = np.broadcast_arrays(np.asarray(norms, np.float64), np.radians(np.asarray(angles, np.float64)))
    x, y = np.zeros((2, norms.size, dim), np.float32)
    x[:, 0] = norms.ravel()
    y[:, 0], y[:, 1] = (norms * np.cos(radians)).ravel(), (norms * np.sin(radians)).ravel()
    return x, y


def cell_vectors(cells: list[Cell], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pair_vectors` of each cell's (norm, angle)."""
    points = [dict(cell.point) for cell in cells]
    return pair_vectors([p["norm"] for p in points], [p["angle"] for p in points], dim)


def _exact_kernel(estimator: str, x, y) -> np.ndarray:
    return np.asarray(KERNELS[rfa.estimator(estimator).kernel](x, y), np.float64)


def predicted_relative_error(estimator: str, x, y, num_features: int, repetitions: int, **params):
    """Predicted relative standard error of the Monte Carlo MSE, ``sqrt((E e⁴/(E e²)² - 1)/n)``, ``[...]``.

    For a mean of m iid estimates, ``E e⁴ = (μ₄ + 3(m-1)μ₂²)/m³`` and ``(E e²)² = μ₂²/m²``, so the
    ratio minus 1 is ``(κ - 3)/m + 2`` with the kurtosis ``κ = μ₄/μ₂²`` of one vector's estimate,
    whose central moments come from ``Theory.log_relative_moments``
    (:func:`rfa.random_features.closed_forms.central_moments`); NaN (unknown) where the variance is so
    small that μ₄ still drowns in rounding. An estimator whose estimate is no such mean gives
    ``E e⁴`` itself (``Theory.error_fourth_moment``, an upper bound: the prediction errs towards
    "heavy tails"). ``inf`` where the fourth moment is infinite, 0 where the estimator is exact,
    NaN for an estimator with neither. For coupled vectors it is the iid prediction.
    """
    theory = rfa.estimator(estimator).theory
    shape = np.broadcast_shapes(np.shape(x)[:-1], np.shape(y)[:-1])
    if theory is not None and theory.error_fourth_moment is not None:
        log_mse = np.asarray(rfa.theory.log_mse(estimator, x, y, num_features, **params), np.float64)
        relative_mse = np.exp(log_mse - 2 * np.log(_exact_kernel(estimator, x, y)))
        fourth = theory.error_fourth_moment(x, y, num_features, **params)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            error = np.sqrt(np.maximum(fourth / relative_mse**2 - 1, 0.0) / repetitions)
        error = np.where(np.isnan(error) | np.isinf(fourth), np.inf, error)
        return np.where(relative_mse == 0, 0.0, error)
    if theory is None or theory.log_relative_moments is None:
        return np.full(shape, np.nan)
    mu2, mu4, terms = rfa.theory.central_moments(theory.log_relative_moments(x, y, **params))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        rounding = 64 * np.finfo(np.float64).eps * (1 + np.abs(terms).max(-1))  # errors of log E U^k ~ eps
        kurtosis = np.maximum(mu4 / mu2**2, 1.0)
        error = np.sqrt(((kurtosis - 3) / num_features + 2) / repetitions)
    error = np.where(np.isnan(error) | np.isinf(mu4), np.inf, error)
    error = np.where(mu4 < 100 * rounding, np.nan, error)
    return np.where(mu2 == 0, 0.0, error)


@functools.partial(jax.jit, static_argnames=("batch", "estimator", "kind", "num_features", "params"))
def _relative_error_moments(key, first, end, x, y, exact, *, batch, estimator, kind, num_features, params):
    """Over repetitions ``first .. min(first + batch, end) - 1``: ``Σ U²``, ``max U²`` and ``Σ (U²/max U²)²``
    per pair, ``U = K̂/K - 1``; repetition r draws its projection from ``fold_in(key, r)``."""
    reps = first + jnp.arange(batch)
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, reps)
    valid = reps < end

    def squared_relative_error(key):
        W, sampled = rfa.estimator(estimator).draw(key, num_features, x.shape[-1], projection_kind=kind)
        return (_estimate(x, y, W, estimator, **dict(params), **sampled) / exact - 1.0) ** 2

    sq = jnp.where(valid[:, None], jax.vmap(squared_relative_error)(keys), 0.0)  # [B, P]
    peak = jnp.max(sq, axis=0)
    safe_peak = jnp.where(peak > 0, peak, 1.0)
    return jnp.sum(sq, axis=0), peak, jnp.sum((sq / safe_peak) ** 2, axis=0)


def _estimate(x, y, W, estimator: str, **params) -> jax.Array:
    """``φ_q(x)ᵀφ_k(y)`` for every pair, fitted parameters fitted to each pair (as rfa's kernel estimators)."""
    fm = rfa.estimator(estimator)
    estimate = rfa.estimate_softmax_kernel if fm.kernel == "softmax" else rfa.estimate_gaussian_kernel
    return estimate(x, y, W, estimator, **params)


def has_closed_form(estimator: str, kind: str) -> bool:
    """Whether ``estimator`` has a closed-form MSE for projections of ``kind``."""
    theory = rfa.estimator(estimator).theory
    return theory is not None and kind in theory.projection_kinds


def _theory(config, cell_group: list[Cell], x, y) -> dict[str, np.ndarray]:
    """Closed-form MSE (NaN: none known for this estimator and projection) and a published bound (NaN: none)."""
    estimator, kind, m = cell_group[0].group
    params = estimator_params(config, estimator)
    log_mse = bound = np.full(len(cell_group), np.nan)
    if has_closed_form(estimator, kind):
        log_mse = np.asarray(rfa.theory.log_mse(estimator, x, y, m, projection_kind=kind, **params), np.float64)
        theory = rfa.estimator(estimator).theory
        published = theory.bound(x, y, m, kind) if theory.bound else None
        if published is not None:
            bound = np.asarray(published, np.float64)
    return {"log_mse_theory": log_mse, "mse_theory": np.exp(log_mse), "mse_bound": bound}


def _projection_size(kind: str, num_features: int, dim: int) -> int:
    """Values drawn for one projection: coupled (orthogonal, simplex) rows come from whole d x d Gaussian blocks."""
    return (math.ceil(num_features / dim) * dim * dim if kind != "iid" else 0) + 2 * num_features * dim


def measure(config, cell_group: list[Cell], context=None, done=lambda cell: False) -> Iterator[tuple[Cell, dict]]:
    """Closed-form and Monte Carlo MSE of the cells of one (estimator, projection, m) group not ``done``.

    Points are split into chunks from the whole group, so a resumed group computes every chunk
    exactly as an uninterrupted run does (same shapes, same bits); chunks whose cells are all
    done are skipped.
    """
    estimator, kind, m = cell_group[0].group
    params = estimator_params(config, estimator)
    x, y = cell_vectors(cell_group, config.dim)
    exact = _exact_kernel(estimator, x, y)
    theory = _theory(config, cell_group, x, y)
    n = config.repetitions
    predicted = predicted_relative_error(estimator, x, y, m, n, **params)
    skip = (predicted > config.max_relative_error) if config.max_relative_error > 0 else np.zeros(len(x), bool)
    run = np.flatnonzero(~skip)
    values_per_pair = 2 * rfa.estimator(estimator).num_outputs(m, config.dim)  # φ(x) and φ(y)
    points_per_chunk = max(1, config.batch_elements // values_per_pair)
    base_key = jax.random.key(group_seed(config.seed, cell_group[0].group))
    for start in range(0, len(run), points_per_chunk):
        chunk = run[start : start + points_per_chunk]
        if all(done(cell_group[i]) for i in chunk):
            continue
        began = time.perf_counter()
        per_repetition = len(chunk) * values_per_pair + _projection_size(kind, m, config.dim)
        reps_per_batch = min(n, max(1, config.batch_elements // per_repetition))
        total, fourth = np.zeros(len(chunk)), np.zeros(len(chunk))
        for first in range(0, n, reps_per_batch):
            sums, peak, spread = _relative_error_moments(
                base_key,
                first,
                n,
                x[chunk],
                y[chunk],
                exact[chunk].astype(np.float32),
                batch=reps_per_batch,
                estimator=estimator,
                kind=kind,
                num_features=m,
                params=tuple(params.items()),
            )
            total += np.asarray(sums, np.float64)
            fourth += np.asarray(peak, np.float64) ** 2 * np.asarray(spread, np.float64)
        seconds = (time.perf_counter() - began) / len(chunk)
        mean_sq = total / n
        se = np.sqrt(np.maximum(fourth / n - mean_sq**2, 0.0) / (n - 1))
        for i, index in enumerate(chunk):
            if not done(cell_group[index]):
                monte_carlo = (exact[index] ** 2 * mean_sq[i], exact[index] ** 2 * se[i], n, n * values_per_pair)
                yield cell_group[index], _kernel_record(theory, exact, predicted, index, *monte_carlo, seconds)
    for index in np.flatnonzero(skip):
        if not done(cell_group[index]):
            yield cell_group[index], _kernel_record(theory, exact, predicted, index, math.nan, math.nan, 0, 0, 0.0)


def _kernel_record(theory, exact, predicted, index, mse, se, repetitions, evaluations, seconds) -> dict:
    return {
        "kernel": float(exact[index]),
        **{name: float(values[index]) for name, values in theory.items()},
        "predicted_relative_error": float(predicted[index]),
        "mse_monte_carlo": float(mse),
        "standard_error": float(se),
        "repetitions": repetitions,
        "feature_evaluations": evaluations,
        "seconds": seconds,
    }


def agreement(record: dict) -> tuple[float, str]:
    """``z = (MC - closed form) / SE`` and a verdict: "yes" (``|z| <= 4``), "no", or why there is no test.

    SE is the predicted standard error ``closed form × predicted_relative_error`` where it exists
    (the sample standard error underestimates itself for heavy-tailed estimates), else the sample
    one. Cells whose predicted relative error exceeds ``MEANINGFUL_ERROR`` are "heavy tails": their
    Monte Carlo mean is dominated by draws too rare to have been seen, so it tests nothing.
    """
    theory, monte_carlo = record["mse_theory"], record["mse_monte_carlo"]
    if math.isnan(monte_carlo):
        return math.nan, "not run"
    if math.isnan(theory):
        return math.nan, "no closed form"
    if theory == 0:  # an exact estimator: Monte Carlo sees float32 rounding only
        return 0.0, "yes" if monte_carlo <= 1e-6 * record["kernel"] ** 2 else "no"
    predicted = record.get("predicted_relative_error", math.nan)
    se = theory * predicted if predicted > 0 else record["standard_error"]
    z = (monte_carlo - theory) / se
    if predicted > MEANINGFUL_ERROR:
        return z, "heavy tails"
    return z, "yes" if abs(z) <= AGREEMENT_SIGMAS else "no"


def agreement_counts(records: list[dict]) -> dict[str, int]:
    """How many cells :func:`agreement` calls "yes", "no", "heavy tails", "not run" and "no closed form"."""
    verdicts = [agreement(r)[1] for r in records]
    return {v: verdicts.count(v) for v in ("yes", "no", "heavy tails", "not run", "no closed form")}


def agreement_claim(counts: dict[str, int]) -> str:
    compared = counts["yes"] + counts["no"]
    return f"{counts['yes']}/{compared} compared cells within {AGREEMENT_SIGMAS:g} SE of the closed form"


def agreement_verdict(records: list[dict]) -> Verdict:
    """Performer Lemma 2 (and every closed form): reproduced when every compared cell agrees with Monte Carlo.

    Example:
      >>> cell = {"mse_theory": 1.0, "mse_monte_carlo": 1.02, "predicted_relative_error": 0.01, "kernel": 1.0}
      >>> agreement_verdict([cell]).line("performer_lemma2")  # z = 2
      'performer_lemma2 — reproduced: closed-form MSE vs Monte Carlo: 1/1 compared cells within 4 SE ...'
      >>> agreement_verdict([dict(cell, mse_monte_carlo=1.05)]).reproduced  # z = 5
      False
    """
    counts = agreement_counts(records)
    compared = counts["yes"] + counts["no"]
    claim = (
        f"closed-form MSE vs Monte Carlo: {agreement_claim(counts)} "
        f"({counts['heavy tails']} heavy-tailed, {counts['not run']} not run: predicted Monte Carlo error above "
        "max_relative_error)"
    )
    return Verdict(compared > 0 and counts["no"] == 0, claim)


def pair_points(records: list[dict]) -> list[tuple[float, float]]:
    """The sweep's (norm, angle) points, sorted."""
    return sorted({(r["norm"], r["angle"]) for r in records})


def monte_carlo_records(records: list[dict]) -> list[dict]:
    """The cells where Monte Carlo ran."""
    return [r for r in records if not math.isnan(r["mse_monte_carlo"])]


def kernel_agreement(config, records: list[dict], workdir: str, *, table: bool = True) -> Analysis:
    """Closed form vs Monte Carlo for every cell: a scatter plot and (if ``table``) a table with z-scores."""
    measured = monte_carlo_records(records)
    fig = Figure(layout="constrained", figsize=(5.5, 5))
    ax = fig.subplots()
    for estimator in config.estimators:
        for kind in config.projections:
            rows = [r for r in select(measured, estimator=estimator, projection=kind) if r["mse_theory"] > 0]
            if rows:
                ax.errorbar(
                    [r["mse_theory"] for r in rows],
                    [r["mse_monte_carlo"] for r in rows],
                    yerr=[r["standard_error"] for r in rows],
                    fmt="o",
                    ms=4,
                    label=f"{estimator} ({kind})",
                )
    limits = [min(ax.get_xlim()[0], ax.get_ylim()[0]), max(ax.get_xlim()[1], ax.get_ylim()[1])]
    ax.plot(limits, limits, "k--", lw=1, label="Monte Carlo = closed form")
    ax.set(xscale="log", yscale="log", xlabel="closed-form MSE", ylabel="Monte Carlo MSE")
    ax.set_title(f"{config.name}: d = {config.dim}, {config.repetitions} repetitions")
    ax.legend(fontsize=8)
    figure = save_figure(fig, workdir, "theory_vs_monte_carlo.png")
    rows = []
    for r in records:
        z, verdict = agreement(r)
        rows.append(
            [r["estimator"], r["projection"], fmt(r["m"]), fmt(r["norm"]), fmt(r["angle"]), fmt(r["kernel"])]
            + [fmt(r["mse_theory"]), fmt(r["mse_monte_carlo"]), fmt(r["standard_error"]), fmt(z)]
            + [verdict if verdict != "no" else "**no**"]
        )
    counts = agreement_counts(records)
    header = ["estimator", "W", "m", "norm", "angle", "SM(x, y)", "MSE closed form", "MSE Monte Carlo", "SE", "z"]
    sections = [
        f"## Closed form vs Monte Carlo\n\n**{counts['yes']} of {counts['yes'] + counts['no']}** compared cells "
        f"agree within {AGREEMENT_SIGMAS:g} standard errors (z = (MC − closed form)/SE, SE predicted from the "
        f"closed-form fourth moment where it exists). Not compared: {counts['heavy tails']} cells with heavy tails "
        f"(predicted Monte Carlo relative error above {MEANINGFUL_ERROR:g}: the sample mean misses the rare draws "
        f"that carry the MSE and falls below the closed form) and {counts['not run']} cells not run "
        f"(predicted error above `max_relative_error` = {config.max_relative_error:g}).",
        image_link(figure),
        *([markdown_table([*header, "agrees"], rows)] if table else []),
    ]
    return Analysis(agreement_verdict(records), sections)


register_experiment_kind(ExperimentKind("kernel_mse", check, check_estimator, points, measure, kernel_agreement))
