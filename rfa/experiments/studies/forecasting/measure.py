"""What the forecasting study trains and measures (:mod:`rfa.experiments.studies.forecasting`: the study, its
command line and its JSON)."""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from rfa.configs import load_task
from rfa.data.series import seasonal_naive
from rfa.experiments.common.seeded import train_seeds
from rfa.experiments.common.timing import memory_bytes, slope, timing_summary
from rfa.tasks import eval_batches, get_task
from rfa.train.config import build_model


def task_config(comparison, attention: str, scale: str | None = None):
    """The training config of ``tasks/<task>.py:<attention>[,<scale>]`` (default scale: ``comparison.scale``; a
    clear error if there is none)."""
    scale = comparison.scale if scale is None else scale
    config = load_task(comparison.task, f"{attention},{scale}" if scale else attention)
    config.data_dir = comparison.data_dir
    return config


def select(comparison, workdir: str) -> tuple[str, list[dict], dict]:
    """Trains every kind and seed at each candidate scale of ``comparison.candidates`` (in
    ``<workdir>/<candidate>/<attention>``) and keeps the candidate with the lowest validation MSE, averaged over
    kinds and seeds. Every run scores its test years once, at its end, as every training run does; the study
    reports them only for the candidate kept. Without candidates, ``comparison.scale`` trains in
    ``<workdir>/<attention>`` and nothing is selected.

    Returns:
      the chosen scale, its :func:`rfa.experiments.common.spread.over_seeds` rows, and ``{"metric", "candidates":
      {scale: mean validation MSE}, "chosen"}`` (empty without candidates).
    """
    if not comparison.candidates:
        rows = [
            train_seeds(task_config(comparison, a), os.path.join(workdir, a), comparison.seeds)
            for a in comparison.attention
        ]
        return comparison.scale, rows, {}
    trained = {
        scale: [
            train_seeds(
                task_config(comparison, a, scale), os.path.join(workdir, scale or "default", a), comparison.seeds
            )
            for a in comparison.attention
        ]
        for scale in comparison.candidates
    }
    validation = {
        scale: float(np.mean([r["validation"]["mse"]["mean"] for r in rows])) for scale, rows in trained.items()
    }
    chosen = min(validation, key=validation.get)
    return chosen, trained[chosen], {"metric": "validation mse", "candidates": validation, "chosen": chosen}


def seasonal_naive_scores(config) -> dict:
    """MSE and MAE of the seasonal-naive forecast on the test windows the runs are scored on."""
    task = get_task(config.task)
    squared = absolute = count = 0.0
    batches = eval_batches(
        task,
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        split=task.test_split,
        horizon=config.model.horizon,
    )
    for batch in batches:
        errors = seasonal_naive(batch["inputs"], config.model.horizon, task.season) - batch["targets"]
        weights = np.broadcast_to(batch["weight"][:, None, None], errors.shape)
        squared, absolute = (
            squared + float((errors**2 * weights).sum()),
            absolute + float((np.abs(errors) * weights).sum()),
        )
        count += float(weights.sum())
    return {"mse": squared / count, "mae": absolute / count}


def step_time(config, lookback: int, repeats: int) -> dict:
    """One compiled training step of the forecaster at ``lookback`` (a token per step): time and memory."""
    config = config.copy_and_resolve_references()
    config.max_length, config.model.patch_length = lookback, 1
    model = build_model(config, get_task(config.task))
    graphdef, state = nnx.split((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)))
    x = jax.random.normal(jax.random.key(lookback), (config.batch_size, lookback, 1))
    y = jax.random.normal(jax.random.key(1), (config.batch_size, config.model.horizon, 1))

    def step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    compiled = jax.jit(step, donate_argnums=0).lower(state, x, y).compile()
    state, loss = compiled(state, x, y)  # warm-up
    jax.block_until_ready(loss)
    seconds = []
    for _ in range(repeats):  # the state is donated: each step takes the previous one's
        start = time.perf_counter()
        state, loss = compiled(state, x, y)
        jax.block_until_ready(loss)
        seconds.append(time.perf_counter() - start)
    return {"lookback": lookback, "memory": memory_bytes(compiled), **timing_summary(seconds)}


def run(comparison, workdir: str) -> dict:
    """Trains (or reads back) every kind, scores seasonal-naive, times the steps; the results."""
    scale, runs, selection = select(comparison, workdir)
    naive = seasonal_naive_scores(task_config(comparison, comparison.attention[0], scale))
    timing = {
        kind: [
            step_time(task_config(comparison, kind), lookback, comparison.repeats) for lookback in comparison.lookbacks
        ]
        for kind in (comparison.timing_kinds if comparison.lookbacks else ())
    }
    slopes = {kind: slope([(r["lookback"], r["median_ms"]) for r in rows]) for kind, rows in timing.items()}
    return {"runs": runs, "selection": selection, "seasonal_naive": naive, "timing": timing, "slopes": slopes}
