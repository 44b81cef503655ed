"""The measurements of the estimators-in-models study (:mod:`rfa.experiments.studies.estimators_in_models`):
the models prepared, each estimator swapped in at every site, its errors and variances measured."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import rfa
from rfa.experiments.common.spread import Spread
from rfa.experiments.studies.estimators_in_models.models import MODEL_KINDS, RfaModel, metric_batches
from rfa.tasks import eval_batches, get_task
from rfa.workdir import ConfigError, write_atomic

FITS = ("per_call", "calibrated")
STATES = ("init", "trained")


def relative_error(estimate, exact, weights):
    """``|ê − e| / |e − ē|`` over the rows whose ``weights`` (the leading axes of ``exact``) are positive; ē is
    the mean of those rows. Traceable: a scalar array.

    Example:
      >>> estimate, exact = jnp.array([[1.0], [3.0], [9.0]]), jnp.array([[0.0], [2.0], [5.0]])
      >>> float(relative_error(estimate, exact, jnp.array([1, 1, 0])))
      1.0
    """
    keep = jnp.asarray(weights) > 0
    rows = keep.reshape(keep.shape + (1,) * (exact.ndim - keep.ndim))
    mean = jnp.sum(jnp.where(rows, exact, 0.0), axis=tuple(range(keep.ndim))) / jnp.sum(keep)
    error = jnp.sum(jnp.where(rows, (estimate - exact) ** 2, 0.0))
    return jnp.sqrt(error / jnp.sum(jnp.where(rows, (exact - mean) ** 2, 0.0)))


# The measures.


def valid_pairs(key_mask: np.ndarray, count: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` (row, query, key) index triples of valid tokens of the same sequence, drawn uniformly."""
    rng = np.random.default_rng(seed)
    rows = np.flatnonzero(key_mask.any(-1))[rng.integers(0, key_mask.any(-1).sum(), count)]
    valid = [np.flatnonzero(key_mask[r]) for r in rows]
    return rows, np.array([rng.choice(v) for v in valid]), np.array([rng.choice(v) for v in valid])


@functools.partial(jax.jit, static_argnames=("estimator", "num_features", "causal", "draws"))
def site_measures(q, k, v, key_mask, params, pairs, key, *, estimator, num_features, causal, draws):
    """One site's measures on its own ``q, k, v [batch, length, heads, d]``: the relative error of the
    estimator's attention output against softmax's (valid query tokens), and the closed-form and measured
    relative variance ``E(κ̂ − κ)² / κ²`` of the m-feature estimate of ``κ = exp(xᵀy)`` (x, y: a query and a
    key scaled by ``d^{-1/4}``; iid features, ``draws`` draws), each the median over the ``pairs`` (row, query,
    key) and the heads."""
    mask = key_mask[:, None, None, :]
    exact = rfa.softmax_attention(q, k, v, mask=mask, is_causal=causal)
    W = rfa.sample_projection(key, num_features, q.shape[-1])
    approx = rfa.kernelized_attention(
        q, k, v, estimator=estimator, projection=W, mask=mask, is_causal=causal, feature_params=params or None
    )
    rows, i, j = pairs
    scale = q.shape[-1] ** -0.25
    x, y = jnp.swapaxes(q[rows, i], 0, 1) * scale, jnp.swapaxes(k[rows, j], 0, 1) * scale  # [heads, pairs, d]
    log_sm = jnp.sum(x * y, -1)
    closed = jnp.exp(rfa.theory.log_mse(estimator, x, y, num_features, **params) - 2 * log_sm)

    def draw(key):
        projection = rfa.sample_projection(key, num_features, x.shape[-1], projection_kind="iid")
        return rfa.estimate_softmax_kernel(x, y, projection, estimator, **params)

    estimates = jax.lax.map(draw, jax.random.split(jax.random.fold_in(key, 1), draws))
    measured = jnp.mean((estimates / jnp.exp(log_sm) - 1.0) ** 2, axis=0)
    return relative_error(approx, exact, key_mask), jnp.median(closed), jnp.median(measured)


def site_params(estimator: str, site, calibration_site, fit: str | None) -> dict:
    """The map's parameters at one site: none (no fit), the fit to this call, or the calibrated fit."""
    if fit is None:
        return {}
    q, k, _, key_mask, _ = site if fit == "per_call" else calibration_site
    return rfa.attention.fit_feature_params(estimator, q, k, mask=jnp.asarray(key_mask)[:, None, None, :])


def cells(study) -> list[tuple[str, int, str | None]]:
    """``(estimator, m, fit)`` of every measurement: each fit of ``study.fits`` for maps fitted from data, one
    measurement (fit None) for the others."""
    for estimator in study.estimators:
        rfa.estimator(estimator)  # a clear error for an unknown name
    return [
        (e, m, fit)
        for e in study.estimators
        for m in study.num_features
        for fit in (study.fits if rfa.estimator(e).fit is not None else (None,))
    ]


class Prepared(NamedTuple):
    """One model, state and seed, ready to measure: its kind, exact model and config, a test batch, the
    calibration batches, and each site's ``(q, k, v, key_mask, causal)`` on the test batch and on the
    calibration batches (concatenated along the batch)."""

    kind: RfaModel
    exact: nnx.Module
    config: object
    batch: dict
    calibration: list[dict]
    sites: list[tuple]
    calibration_sites: list[tuple]


def prepare(study, model_name: str, state: str, seed: int, workdir: str) -> Prepared:
    """The exact model of ``model_name`` in ``state`` (training it if needed) and its sites' inputs."""
    kind = MODEL_KINDS[model_name](study, model_name)
    exact, config = kind.exact(state, seed, workdir)
    config.eval_batches = study.eval_batches
    batch = {name: jnp.asarray(value) for name, value in next(iter(metric_batches(config))).items()}
    calibration = [
        {name: jnp.asarray(value) for name, value in b.items()}
        for b in eval_batches(
            get_task(config.task),
            data_dir=config.data_dir,
            batch_size=config.batch_size,
            max_length=config.max_length,
            split="validation",
            max_batches=study.calibration_batches,
        )
    ]
    causal = kind.causal(exact)
    sites = [(*inputs, c) for inputs, c in zip(kind.site_inputs(exact, batch), causal, strict=True)]
    per_batch = [kind.site_inputs(exact, b) for b in calibration]
    calibration_sites = [
        (*(jnp.concatenate(parts) for parts in zip(*group, strict=True)), c)
        for group, c in zip(zip(*per_batch, strict=True), causal, strict=True)
    ]
    return Prepared(kind, exact, config, batch, calibration, sites, calibration_sites)


def fits_sites(fit: str | None, sites: list[tuple]) -> bool:
    """Whether ``fit`` applies to a model with these sites: a causal site cannot fit per call (its prefixes would
    see different estimators)."""
    return not (fit == "per_call" and any(site[4] for site in sites))


def measure_sites(
    study, estimator: str, num_features: int, fit: str | None, sites: list[tuple], calibration_sites: list[tuple], key
) -> tuple[list[float], list[float], list[float]]:
    """:func:`site_measures` at every site, each isolated: the layer errors and the closed-form and measured
    variances, one per site."""
    errors, closed, measured = [], [], []
    for index, (site, calibration_site) in enumerate(zip(sites, calibration_sites, strict=True)):
        q, k, v, key_mask, causal = site
        error, c, m = site_measures(
            q,
            k,
            v,
            key_mask,
            site_params(estimator, site, calibration_site, fit),
            valid_pairs(np.asarray(key_mask), study.variance_pairs),
            jax.random.fold_in(key, index),
            estimator=estimator,
            num_features=num_features,
            causal=causal,
            draws=study.variance_draws,
        )
        errors.append(float(error))
        closed.append(float(c))
        measured.append(float(m))
    return errors, closed, measured


def measure(study, model_name: str, state: str, seed: int, workdir: str) -> list[dict]:
    """Every cell of one model, state and seed: one record each."""
    kind, exact, config, batch, calibration, sites, calibration_sites = prepare(study, model_name, state, seed, workdir)
    exact_logits, weights = kind.forward(exact, batch)
    metric_name, exact_metric = kind.metric(exact, config)
    records = []
    for estimator, num_features, fit in cells(study):
        if not fits_sites(fit, sites):
            continue
        key = jax.random.fold_in(jax.random.key(seed), num_features)
        layer_errors, closed, measured = measure_sites(
            study, estimator, num_features, fit, sites, calibration_sites, key
        )
        model = kind.swapped(exact, config, estimator, num_features, seed)
        if fit == "calibrated":
            with rfa.layers.calibrating(model):
                for b in calibration:
                    kind.outputs(model, b)  # eager calls: each site fits to its own queries and keys
        logits, _ = kind.forward(model, batch)
        records.append(
            {
                "model": model_name,
                "state": state,
                "seed": seed,
                "estimator": estimator,
                "num_features": num_features,
                "fit": fit or "-",
                "output_error": float(relative_error(logits, exact_logits, weights)),
                "layer_errors": layer_errors,
                "metric": kind.metric(model, config)[1],
                "exact_metric": exact_metric,
                "metric_name": metric_name,
                "closed_form_variance": float(np.mean(closed)),
                "measured_variance": float(np.mean(measured)),
            }
        )
    return records


MEASURE_FIELDS = (  # what the records of one model, state and seed depend on
    "tasks",
    "estimators",
    "num_features",
    "fits",
    "scale",
    "flax_steps",
    "calibration_batches",
    "eval_batches",
    "variance_pairs",
    "variance_draws",
)


def measured(study, model_name: str, state: str, seed: int, workdir: str) -> list[dict]:
    """:func:`measure`'s records, kept in ``<workdir>/measures/<model>_<state>_seed<seed>.json`` (see
    :func:`kept`)."""
    return kept(
        study,
        MEASURE_FIELDS,
        os.path.join(workdir, "measures", f"{model_name}_{state}_seed{seed}.json"),
        lambda: measure(study, model_name, state, seed, workdir),
    )


def kept(study, fields: tuple[str, ...], path: str, compute: Callable[[], list[dict]]) -> list[dict]:
    """``compute()``'s records, written to ``path`` with the study's ``fields`` and read back by a later run whose
    fields are the same (a stopped study resumes; a changed one measures again)."""
    values = json.loads(json.dumps({name: study[name] for name in fields}, default=dict))
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        if saved["study"] == values:
            return saved["records"]
    records = compute()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps({"study": values, "records": records}))
    return records


def run(study, workdir: str) -> list[dict]:
    """Measures every model, state and seed of ``study``; one row per (model, state, estimator, m, fit) with the
    measures as :class:`rfa.experiments.common.spread.Spread` dicts over the seeds, and the per-seed ``records``."""
    check(study)
    records = [
        record
        for name in study.models
        for state in study.states
        for seed in study.seeds
        for record in measured(study, name, state, seed, workdir)
    ]
    return over_seeds(records)


def check(study) -> None:
    """A clear error for a model, state or fit the study does not know."""
    for name in study.models:
        if name not in MODEL_KINDS:
            raise ConfigError(f"config.models: {name!r} is not one of {sorted(MODEL_KINDS)}.")
        if name not in study.tasks:
            raise ConfigError(f"config.tasks has no task for the model {name!r}.")
    for state in study.states:
        if state not in STATES:
            raise ConfigError(f"config.states: {state!r} is not one of {list(STATES)}.")
    for fit in study.fits:
        if fit not in FITS:
            raise ConfigError(f"config.fits: {fit!r} is not one of {list(FITS)}.")


def over_seeds(records: list[dict]) -> list[dict]:
    """One row per (model, state, estimator, m, fit), in the order of first appearance: the measures of its seeds
    as :class:`rfa.experiments.common.spread.Spread` dicts, and the records themselves."""
    rows = []
    for row, group in by_cell(records, _IDENTITY):
        for name in ("output_error", "closed_form_variance", "measured_variance"):
            row[name] = Spread.of(r[name] for r in group).as_dict()
        row["metric_change"] = Spread.of(r["metric"] - r["exact_metric"] for r in group).as_dict()
        per_layer = zip(*(r["layer_errors"] for r in group), strict=True)
        row["layer_errors"] = [Spread.of(errors).as_dict() for errors in per_layer]
        row["metric_name"], row["records"] = group[0]["metric_name"], group
        rows.append(row)
    return rows


def by_cell(records: list[dict], identity: tuple[str, ...]) -> list[tuple[dict, list[dict]]]:
    """The records grouped by their ``identity`` fields, in the order of first appearance: ``(identity values,
    the group sorted by seed)`` each.

    Example:
      >>> records = [{"estimator": e, "seed": s} for s in (1, 0) for e in ("trig", "positive")]
      >>> [(cell["estimator"], [r["seed"] for r in group]) for cell, group in by_cell(records, ("estimator",))]
      [('trig', [0, 1]), ('positive', [0, 1])]
    """
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(tuple(record[f] for f in identity), []).append(record)
    return [
        (dict(zip(identity, key, strict=True)), sorted(group, key=lambda r: r["seed"])) for key, group in groups.items()
    ]


_IDENTITY = ("model", "state", "estimator", "num_features", "fit")
