"""The estimator_fit experiment: estimators fitted to sets of queries and keys, their variance over all pairs.

Each cell is one (estimator, query/key set): the estimator is fitted to each head's queries and keys (OPRF's
A, the DERF family's A and transforms), then its closed-form one-vector variance V is averaged over every
query-key pair, with a Monte Carlo check at a few pairs. The sets: synthetic ``anisotropic`` queries and keys
of different covariances, and the queries and keys of a trained model's attention layer (``trained_model``).
Each set is ``(q, k)``, float32 ``[heads, n, d]``, scaled as kernelized attention scales them (``d^{-1/4}``
each, so ``qᵀk`` is the softmax logit). Likhosherstov et al., "Dense-Exponential Random Features", arXiv
2302.00787, fit DERF to the statistics of the queries and keys they will see; their gain over OPRF needs
queries and keys of different covariances.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from matplotlib.figure import Figure

import rfa
from rfa.experiments.common.cli import resolve_config
from rfa.experiments.common.report import Analysis, fmt, image_link, markdown_table, save_figure
from rfa.experiments.sweep_framework import config_checks
from rfa.experiments.sweep_framework.cells import Cell, estimator_params, group_seed
from rfa.experiments.sweep_framework.registry import ExperimentKind, register_experiment_kind
from rfa.experiments.sweeps.kernel_mse import predicted_relative_error
from rfa.models import AttentionInputs
from rfa.workdir import ConfigError

DATASETS = ("anisotropic", "trained_model")  # the query/key sets


def _dataset(name, field):
    if name not in DATASETS:
        raise ConfigError(f"{field} has unknown dataset {name!r}; use one of {list(DATASETS)}.")


def check(config) -> None:
    config_checks.sequence(config.datasets, "datasets", _dataset, "dataset")
    for field in ("num_vectors", "pairs_checked", "repetitions"):
        config_checks.positive_int(config[field], f"config.{field}")
    config_checks.positive_int(config.model.num_train_steps, "config.model.num_train_steps")
    if config.num_vectors < 2 or config.repetitions < 2:
        raise ConfigError("config.num_vectors and config.repetitions must be >= 2 (a fit and a standard error).")
    config_checks.positive(config.input_scale, "config.input_scale")
    config_checks.positive(config.anisotropy, "config.anisotropy")
    if config.num_features != (1,) or config.projections != ("iid",):
        raise ConfigError("estimator_fit compares per-vector variances: num_features=(1,), projections=('iid',).")


def check_estimator(config, fm) -> None:
    if fm.kernel != "softmax" or fm.theory is None:
        raise ConfigError(
            f"config.estimators: {fm.name!r} needs a closed-form variance of the softmax kernel for estimator_fit."
        )


def points(config) -> list[tuple]:
    return [(("dataset", float(DATASETS.index(name))),) for name in config.datasets]


# Query and key sets.


def anisotropic(config: ml_collections.ConfigDict) -> tuple[np.ndarray, np.ndarray]:
    """One head of n queries and n keys with Gaussian entries of different covariances.

    Standard deviations fall geometrically from ``input_scale`` to ``input_scale / anisotropy``
    along the axes of a random rotation, in the opposite order for the keys (rotated again), and the
    keys have a mean; so the two second moments differ, which is where DERF gains over OPRF.
    """
    rng = np.random.default_rng(group_seed(config.seed, ("anisotropic",)))
    d, n = config.dim, config.num_vectors
    scales = config.input_scale * config.anisotropy ** -np.linspace(0.0, 1.0, d)
    rotations = [np.linalg.qr(rng.standard_normal((d, d)))[0] for _ in range(2)]
    q = (rng.standard_normal((n, d)) * scales) @ rotations[0].T
    k = (rng.standard_normal((n, d)) * scales[::-1]) @ rotations[1].T + 0.3 * config.input_scale
    return q[None].astype(np.float32), k[None].astype(np.float32)


def _load_config(spec: str) -> ml_collections.ConfigDict:
    """``path/to/config.py:arg`` → its ``get_config(arg)``."""
    path, _, arg = resolve_config(spec).partition(":")
    module_spec = importlib.util.spec_from_file_location("model_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg or None)


def trained_model(config: ml_collections.ConfigDict, workdir: str) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the queries and keys of encoder layer ``config.model.layer`` on evaluation inputs.

    The model of ``config.model.config`` is trained for ``config.model.num_train_steps`` steps into
    ``<workdir>/model`` (resumed there like any training run; evaluated on one batch only), then its self-attention
    projections are read on the first evaluation batch, padding left out; up to ``num_vectors`` tokens per head.
    """
    from rfa.tasks import eval_batches
    from rfa.train import load_model, train_and_evaluate

    train_config = _load_config(config.model.config)
    train_config.num_train_steps = config.model.num_train_steps
    train_config.eval_batches = 1  # the study reads the model's projections, not its metrics
    # nor its intermediate states: checkpoints and evaluations at least half the training apart (the full variant
    # keeps its task's 200; the quick one's 40 steps saved 10 checkpoints at the quick scale's 4, a tenth of its run)
    for field in ("checkpoint_every", "eval_every"):
        train_config[field] = max(train_config[field], train_config.num_train_steps // 2)
    train_config.data_dir = config.data_dir
    model_dir = os.path.join(workdir, "model")
    train_and_evaluate(train_config, model_dir)
    model, train_config, task, _ = load_model(model_dir)
    batch = next(
        iter(
            eval_batches(
                task,
                data_dir=config.data_dir,
                batch_size=train_config.batch_size,
                max_length=train_config.max_length,
                max_batches=1,
            )
        )
    )
    source = jnp.asarray(batch["inputs"])
    keep = np.asarray(source != model.config.pad_id)
    encode = (lambda m, x: m.encode(x)) if hasattr(model, "encode") else (lambda m, x: m(x))
    _, sown = nnx.capture(encode, AttentionInputs)(model, source)  # the encoder's pass over the batch
    q, k, _, _ = sown["encoder"]["layers"][config.model.layer]["attention"]["inputs"][0]
    q, k = (np.asarray(x, np.float32)[keep] for x in (q, k))  # [tokens, heads, d]
    q, k = (np.swapaxes(x[: config.num_vectors], 0, 1) * x.shape[-1] ** -0.25 for x in (q, k))
    return q.astype(np.float32), k.astype(np.float32)


class QueryKeySets:
    """The sets of a run, made once and shared by every estimator's cells."""

    def __init__(self, config: ml_collections.ConfigDict, workdir: str):
        self.config, self.workdir, self._cache = config, workdir, {}

    def __call__(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._cache:
            self._cache[name] = (
                anisotropic(self.config) if name == "anisotropic" else trained_model(self.config, self.workdir)
            )
        return self._cache[name]


def fitted_params(fm, params: dict, q: np.ndarray, k: np.ndarray) -> dict:
    """The estimator's parameters for one head's set: the config's, else its fit to the set (without the
    length axis), else none."""
    if params or fm.fit is None:
        return dict(params)
    fitted = fm.fit(jnp.asarray(q), jnp.asarray(k))
    return {
        name: np.squeeze(np.asarray(value), axis=value.ndim - 1 - fm.event_ndim(name)) for name, value in fitted.items()
    }


# Measurement.


def measure(config, cell_group: list[Cell], sets, done=lambda cell: False) -> Iterator[tuple[Cell, dict]]:
    """Per dataset: one estimator fitted to each head's queries and keys, its closed-form variance over all pairs.

    Records the means over query-key pairs (and heads) of ``log V`` (one vector's variance) and of
    ``log((V + SM²)/SM²)``, the log second moment the DERF fits minimise, and a Monte Carlo check of
    ``V`` at ``config.pairs_checked`` pairs per head (``config.repetitions`` one-vector draws each): of
    the pairs ``(i, 7i + 3 mod n)``, those with the smallest predicted Monte Carlo error, compared where
    that error is small (as in the kernel sweeps), counted as heavy-tailed elsewhere.
    """
    estimator = cell_group[0].estimator
    fm = rfa.estimator(estimator)
    base_key = jax.random.key(group_seed(config.seed, cell_group[0].group))
    for cell in cell_group:
        if done(cell):
            continue
        began = time.perf_counter()
        name = dataset_name(cell)
        q_sets, k_sets = sets(name)
        log_variances, objectives, z_scores, heavy = [], [], [], 0
        for head, (q, k) in enumerate(zip(q_sets, k_sets, strict=True)):
            params = fitted_params(fm, estimator_params(config, estimator), q, k)
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
            draws = np.asarray(
                _one_vector_estimates(
                    jax.random.fold_in(base_key, head),
                    xc,
                    yc,
                    {n: jnp.asarray(v) for n, v in params.items()},
                    estimator=estimator,
                    repetitions=config.repetitions,
                ),
                np.float64,
            )
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
        W = rfa.sample_projection(key, 1, x.shape[-1], projection_kind="iid")
        return rfa.estimate_softmax_kernel(x, y, W, estimator, **params)

    return jax.vmap(one)(jax.random.split(key, repetitions))


# Analysis.


def derf_table(records: list[dict]) -> dict[str, dict[str, dict]]:
    """``dataset -> estimator -> record`` of an estimator_fit run."""
    table = {}
    for r in records:
        table.setdefault(r["dataset_name"], {})[r["estimator"]] = r
    return table


def analyze(config, records: list[dict], workdir: str, *, typical: dict | None = None, verdict=None) -> Analysis:
    """Mean log-variance and mean log second moment of each estimator, fitted per set: a figure and a table
    (``typical``: values to print beside them; ``verdict``: the reproduction's)."""
    table = derf_table(records)
    estimators = list(config.estimators)
    fig = Figure(layout="constrained", figsize=(5.5 * len(table), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(table), squeeze=False)[0])
    width = 0.38
    for ax, (dataset, cells) in zip(axes, table.items(), strict=True):
        positions = np.arange(len(estimators))
        ax.bar(positions - width / 2, [cells[e]["objective"] for e in estimators], width, label="log second moment")
        ax.bar(positions + width / 2, [cells[e]["mean_log_variance"] for e in estimators], width, label="log-variance")
        ax.set_xticks(positions, estimators)
        ax.set(title=f"{dataset} ({next(iter(cells.values()))['heads']} head(s))", ylabel="mean over query-key pairs")
        ax.legend(fontsize=7)
    figure = save_figure(fig, workdir, "derf_objective.png")
    rows = [
        [
            dataset,
            e,
            fmt(cells[e]["mean_log_variance"]),
            fmt(cells[e]["objective"]),
            fmt((typical or {}).get(e)),
            f"{cells[e]['pairs_agreeing']}/{cells[e]['pairs_compared']}",
            fmt(cells[e]["pairs_heavy_tailed"]),
        ]
        for dataset, cells in table.items()
        for e in estimators
    ]
    header = [
        "dataset",
        "estimator",
        "mean log V",
        "mean log second moment",
        "typical (d = 16)",
        "MC agrees",
        "heavy-tailed",
    ]
    sections = [
        f"## Estimators fitted to queries and keys (d = {config.dim})\n\n"
        "Each estimator is fitted to each head's queries and keys (OPRF: its A; DERF: A and the transforms, "
        "closed form), then its one-vector variance V is averaged over all query-key pairs: the mean log V and "
        "the mean log((V + SM²)/SM²), the second moment the fits minimise. The anisotropic set has queries and "
        f"keys of different covariances (standard deviations from {fmt(config.input_scale)} down by "
        f"{fmt(config.anisotropy)}x); the trained model's are the encoder layer {config.model.layer} "
        f"self-attention queries and keys of `{config.model.config}` after {config.model.num_train_steps} steps. "
        '"typical" is the order of magnitude docs/references.md gives for anisotropic d = 16 data, not a '
        "value these sets must match.",
        markdown_table(header, rows),
        image_link(figure),
    ]
    return Analysis(verdict, sections)


register_experiment_kind(
    ExperimentKind(
        "estimator_fit",
        check,
        check_estimator,
        points,
        measure,
        analyze,
        context=lambda config, workdir: QueryKeySets(config, workdir),
    )
)
