"""Measurements of one cell group: kernel-estimator MSE (closed form + Monte Carlo) and attention error.

Monte Carlo is jitted and vmapped over repetitions and sweep points. Repetition ``r`` of a group
draws its projection from ``fold_in(key(group seed), r)``, so a cell's numbers depend on the seed
and the cell only — not on the batch size, on the other cells or on an interrupted earlier run.
Repetitions are processed in batches of at most ``config.batch_elements`` feature values, so memory
stays bounded for any repetition count.

Relative errors ``U = K̂/K - 1`` are accumulated (``K`` the exact kernel), which keeps the moments
in float32 range on the device; ``MSE = K² E[U²]`` and its standard error are formed in float64.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

import rfa
from experiments import query_key_sets
from experiments.sweep import DATASETS, Cell, group_seed
from rfa.random_features.kernels import KERNELS


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


def estimator_params(config, estimator: str) -> dict:
    """The fixed parameters ``config.feature_params[estimator]`` of ``estimator`` (empty if none)."""
    return dict(config.feature_params.get(estimator, {}))


def _exact_kernel(estimator: str, x, y) -> np.ndarray:
    return np.asarray(KERNELS[rfa.feature_map(estimator).kernel](x, y), np.float64)


def predicted_relative_error(estimator: str, x, y, num_features: int, repetitions: int, **params):
    """Predicted relative standard error of the Monte Carlo MSE, ``sqrt((E e⁴/(E e²)² - 1)/n)``, ``[...]``.

    For a mean of m iid estimates, ``E e⁴ = (μ₄ + 3(m-1)μ₂²)/m³`` and ``(E e²)² = μ₂²/m²``, so the
    ratio minus 1 is ``(κ - 3)/m + 2`` with the kurtosis ``κ = μ₄/μ₂²`` of one vector's estimate,
    whose central moments come from ``Theory.log_relative_moments``
    (:func:`rfa.random_features.theory.central_moments`); NaN (unknown) where the variance is so
    small that μ₄ still drowns in rounding. An estimator whose estimate is no such mean gives
    ``E e⁴`` itself (``Theory.error_fourth_moment``, an upper bound: the prediction errs towards
    "heavy tails"). ``inf`` where the fourth moment is infinite, 0 where the estimator is exact,
    NaN for an estimator with neither. For coupled vectors it is the iid prediction.
    """
    theory = rfa.feature_map(estimator).theory
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
        W, sampled = rfa.feature_map(estimator).draw(key, num_features, x.shape[-1], kind=kind)
        return (_estimate(x, y, W, estimator, **dict(params), **sampled) / exact - 1.0) ** 2

    sq = jnp.where(valid[:, None], jax.vmap(squared_relative_error)(keys), 0.0)  # [B, P]
    peak = jnp.max(sq, axis=0)
    safe_peak = jnp.where(peak > 0, peak, 1.0)
    return jnp.sum(sq, axis=0), peak, jnp.sum((sq / safe_peak) ** 2, axis=0)


def _estimate(x, y, W, estimator: str, **params) -> jax.Array:
    """``φ_q(x)ᵀφ_k(y)`` for every pair, fitted parameters fitted to each pair (as rfa's kernel estimators)."""
    fm = rfa.feature_map(estimator)
    estimate = rfa.estimate_softmax_kernel if fm.kernel == "softmax" else rfa.estimate_gaussian_kernel
    return estimate(x, y, W, estimator, **params)


def has_closed_form(estimator: str, kind: str) -> bool:
    """Whether ``estimator`` has a closed-form MSE for projections of ``kind``."""
    theory = rfa.feature_map(estimator).theory
    return theory is not None and kind in theory.projections


def _theory(config, cell_group: list[Cell], x, y) -> dict[str, np.ndarray]:
    """Closed-form MSE (NaN: none known for this estimator and projection) and a published bound (NaN: none)."""
    estimator, kind, m = cell_group[0].group
    params = estimator_params(config, estimator)
    log_mse = bound = np.full(len(cell_group), np.nan)
    if has_closed_form(estimator, kind):
        log_mse = np.asarray(rfa.theory.log_mse(estimator, x, y, m, projection=kind, **params), np.float64)
        theory = rfa.feature_map(estimator).theory
        published = theory.bound(x, y, m, kind) if theory.bound else None
        if published is not None:
            bound = np.asarray(published, np.float64)
    return {"log_mse_theory": log_mse, "mse_theory": np.exp(log_mse), "mse_bound": bound}


def _projection_size(kind: str, num_features: int, dim: int) -> int:
    """Values drawn for one projection: coupled (orthogonal, simplex) rows come from whole d x d Gaussian blocks."""
    return (math.ceil(num_features / dim) * dim * dim if kind != "iid" else 0) + 2 * num_features * dim


def measure_kernel_mse(config, cell_group: list[Cell], done=lambda cell: False) -> Iterator[tuple[Cell, dict]]:
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
    values_per_pair = 2 * rfa.feature_map(estimator).num_outputs(m, config.dim)  # φ(x) and φ(y)
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
        W, sampled = rfa.feature_map(estimator).draw(key, num_features, q.shape[-1], kind=kind)
        feature_params = {**dict(params), **sampled}
        out = rfa.kernelized_attention(q, k, v, feature_map=estimator, projection=W, feature_params=feature_params)
        baseline = jnp.broadcast_to(jnp.mean(v, axis=0), v.shape)
        return jnp.mean((out - exact) ** 2), jnp.mean((baseline - exact) ** 2)

    return jax.vmap(one)(keys, q, k, v, exact)


class AttentionInputs:
    """Inputs and exact outputs per input scale, made once per run and shared by every group."""

    def __init__(self, config):
        self.config = config
        self._cache = {}

    def __call__(self, input_scale: float):
        if input_scale not in self._cache:
            q, k, v = attention_inputs(self.config, input_scale)
            self._cache[input_scale] = (q, k, v, _exact_outputs(q, k, v))
        return self._cache[input_scale]


def measure_attention_error(
    config, cell_group: list[Cell], inputs: AttentionInputs, done=lambda cell: False
) -> Iterator[tuple[Cell, dict]]:
    """Attention-output MSE over ``config.num_seeds`` seeds for one (estimator, projection, m) group."""
    estimator, kind, m = cell_group[0].group
    base_key = jax.random.key(group_seed(config.seed, cell_group[0].group))
    keys = jax.vmap(lambda s: jax.random.fold_in(base_key, s))(jnp.arange(config.num_seeds))
    values_per_seed = config.length * rfa.feature_map(estimator).num_outputs(m, config.dim) * 2
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
                keys[index], q[index], k[index], v[index], exact[index], estimator=estimator, kind=kind, num_features=m,
                params=tuple(estimator_params(config, estimator).items()),
            )  # fmt: skip
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


def measure_fit_objective(config, cell_group: list[Cell], sets, done=lambda cell: False) -> Iterator[tuple[Cell, dict]]:
    """Per dataset: one estimator fitted to each head's queries and keys, its closed-form variance over all pairs.

    Records the means over query-key pairs (and heads) of ``log V`` (one vector's variance) and of
    ``log((V + SM²)/SM²)``, the log second moment the DERF fits minimise, and a Monte Carlo check of
    ``V`` at ``config.pairs_checked`` pairs per head (``config.repetitions`` one-vector draws each): of
    the pairs ``(i, 7i + 3 mod n)``, those with the smallest predicted Monte Carlo error, compared where
    that error is small (as in the kernel sweeps), counted as heavy-tailed elsewhere.
    """
    estimator = cell_group[0].estimator
    fm = rfa.feature_map(estimator)
    base_key = jax.random.key(group_seed(config.seed, cell_group[0].group))
    for cell in cell_group:
        if done(cell):
            continue
        began = time.perf_counter()
        name = dataset_name(cell)
        q_sets, k_sets = sets(name)
        log_variances, objectives, z_scores, heavy = [], [], [], 0
        for head, (q, k) in enumerate(zip(q_sets, k_sets, strict=True)):
            params = query_key_sets.fitted_params(fm, estimator_params(config, estimator), q, k)
            x, y = q[:, None], k[None]
            log_var = np.asarray(rfa.theory.log_mse(estimator, x, y, 1, **params), np.float64)
            log_sm_sq = 2 * np.sum(x.astype(np.float64) * y, -1)
            log_variances.append(log_var.ravel())
            objectives.append((np.logaddexp(log_var, log_sm_sq) - log_sm_sq).ravel())
            # Checked: the pairs (i, 7i + 3 mod n) whose Monte Carlo is most informative (smallest predicted error).
            pairs = np.arange(len(q))
            xc, yc = q[pairs], k[(pairs * 7 + 3) % len(k)]
            predicted = predicted_relative_error(estimator, xc, yc, 1, config.repetitions, **params)
            checked = np.argsort(np.nan_to_num(predicted, nan=np.inf), kind="stable")[: config.pairs_checked]
            xc, yc, predicted = xc[checked], yc[checked], predicted[checked]
            exact = np.exp(np.sum(xc.astype(np.float64) * yc, -1))
            theory = np.asarray(rfa.theory.mse(estimator, xc, yc, 1, **params), np.float64)
            draws = np.asarray(_one_vector_estimates(
                jax.random.fold_in(base_key, head), xc, yc, {n: jnp.asarray(v) for n, v in params.items()},
                estimator=estimator, repetitions=config.repetitions,
            ), np.float64)  # fmt: skip
            monte_carlo = np.mean((draws - exact) ** 2, axis=0)
            compared = predicted <= 0.15
            heavy += int(np.sum(~compared))
            z_scores += list(((monte_carlo - theory) / (theory * predicted))[compared])
        z = np.abs(np.asarray(z_scores))
        yield (
            cell,
            {
                "dataset_name": name,
                "mean_log_variance": float(np.mean(np.concatenate(log_variances))),
                "objective": float(np.mean(np.concatenate(objectives))),
                "pairs_compared": len(z),
                "pairs_agreeing": int(np.sum(z <= 4.0)),
                "pairs_heavy_tailed": heavy,
                "max_abs_z": float(z.max()) if len(z) else math.nan,
                "heads": len(q_sets),
                "seconds": time.perf_counter() - began,
            },
        )


def dataset_name(cell: Cell) -> str:
    """The dataset name of an estimator_fit cell."""
    return DATASETS[int(dict(cell.point)["dataset"])]


@functools.partial(jax.jit, static_argnames=("estimator", "repetitions"))
def _one_vector_estimates(key, x, y, params, *, estimator: str, repetitions: int) -> jax.Array:
    """``[repetitions, pairs]`` estimates from one random vector each; compiled once per estimator and shape."""

    def one(key):
        W = rfa.sample_projection(key, 1, x.shape[-1], kind="iid")
        return rfa.estimate_softmax_kernel(x, y, W, estimator, **params)

    return jax.vmap(one)(jax.random.split(key, repetitions))
