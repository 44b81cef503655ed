"""``train_and_evaluate(config, workdir)``: the training loop, resumable from its workdir.

The loop builds the task's data, model and optimizer, restores the newest checkpoint of the
workdir (model, optimizer, data position, step), and then runs jitted steps on a device mesh,
redrawing random projections on the config's schedule, logging averaged training metrics every
``log_every`` steps, evaluating every ``eval_every`` steps, and checkpointing every
``checkpoint_every`` steps and at the end. A run killed at any moment and started again on the
same workdir ends with exactly the metrics of an uninterrupted run (all but the wall-clock ones,
step time and tokens/s): batches, dropout keys and redraw keys depend only on the seed and the
step. With several processes, process 0 writes the files; every process evaluates the same
global batches (its own rows of each), so all of them run the same number of steps.

The workdir then holds ``config.json``, ``metrics.jsonl``, ``tensorboard/``, ``checkpoints/``,
``curves.png`` and ``results.json`` (final evaluation, step time, tokens/s, memory).
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import tqdm
from flax import nnx

from rfa.data import Task, eval_batches, train_batches
from rfa.models import redraw_projections
from rfa.train import sharding
from rfa.train.checkpoint import Checkpoints
from rfa.train.config import EXECUTION_FIELDS, build_model, check_config
from rfa.train.metrics import MetricWriter, plot_curves, read_metrics
from rfa.train.optim import make_optimizer, make_schedule
from rfa.train.steps import make_eval_step, make_train_step, summarize
from rfa.workdir import ConfigError, record_config, write_atomic


def _check_batch(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> int:
    """The rows each process loads; the global batch must split evenly over data devices and processes."""
    devices, processes = mesh.shape["data"], jax.process_count()
    if config.batch_size % devices or config.batch_size % processes:
        raise ConfigError(
            f"config.batch_size = {config.batch_size} must be divisible by the {devices} data-parallel devices "
            f"(mesh.data) and the {processes} processes."
        )
    return config.batch_size // processes


def _process_shard() -> tuple[int, int]:
    return jax.process_index(), jax.process_count()


def _memory_bytes(compiled) -> int:
    """XLA's estimate of a step's peak memory: arguments + outputs + temporaries, less donated buffers."""
    stats = compiled.memory_analysis()
    if stats is None:
        return 0
    return (
        stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    )


def _add(total: dict | None, sums: dict) -> dict:
    return sums if total is None else jax.tree.map(jnp.add, total, sums)


def evaluate(eval_step, state, task: Task, config: ml_collections.ConfigDict, mesh) -> dict:
    """Metrics of ``state`` on the task's evaluation split (``config.eval_batches`` batches, 0: all).

    Every process reads the same global batches and contributes its rows of each, so the number
    of (collective) evaluation steps is the same on every process.
    """
    batches = eval_batches(
        task,
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        max_batches=config.eval_batches or None,
    )
    index, count = _process_shard()
    total = None
    for batch in batches:
        rows = {key: np.array_split(value, count)[index] for key, value in batch.items()}
        total = _add(total, eval_step(state, sharding.global_batch(rows, mesh)))
    return summarize(jax.device_get(total), kind=task.kind)


def initial_state(config: ml_collections.ConfigDict, task: Task) -> tuple[nnx.GraphDef, nnx.State]:
    """``nnx.split((model, optimizer))`` of a freshly initialized run of ``config``."""
    model = build_model(config, task)
    tx = make_optimizer(config.optimizer, num_steps=config.num_train_steps, d_model=config.model.d_model)
    return nnx.split((model, nnx.Optimizer(model, tx, wrt=nnx.Param)))


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *, progress: bool = True) -> dict:
    """Trains ``config``'s model on its task, resuming from ``workdir``; returns the contents of ``results.json``.

    Args:
      config: a training config (``rfa.train.config.base_config`` schema), e.g. from ``configs/sort.py``.
      workdir: where everything the run produces goes; a workdir of a different config is refused
        with ``ConfigError`` before anything in it is touched.
      progress: show a tqdm progress bar.

    Example:
      >>> results = train_and_evaluate(configs.sort.get_config("positive,quick"), "/tmp/sort")
      >>> results["eval"]["accuracy"]
    """
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    try:
        mesh = sharding.make_mesh(config.mesh.data, config.mesh.model)
        state_sharding = sharding.state_sharding(state, mesh)
    except ValueError as error:
        raise ConfigError(f"config.mesh: {error}") from error
    rows = _check_batch(config, mesh)
    num_params = sum(x.size for x in jax.tree.leaves(nnx.split_state(state, nnx.Param, ...)[0]))
    schedule = make_schedule(config.optimizer, num_steps=config.num_train_steps, d_model=config.model.d_model)
    state = jax.device_put(state, state_sharding)

    iterator = iter(
        train_batches(
            task,
            data_dir=config.data_dir,
            batch_size=rows,
            max_length=config.max_length,
            seed=config.seed,
            shard=_process_shard(),
        )
    )
    primary = jax.process_index() == 0
    record_config(workdir, config, execution_fields=EXECUTION_FIELDS, write=primary)  # data and model exist
    checkpoints = Checkpoints(
        os.path.join(workdir, "checkpoints"), keep=config.keep_checkpoints, keep_every=config.keep_checkpoints_every
    )
    start, state = checkpoints.restore_latest(state, iterator)
    writer = MetricWriter(workdir, resume_step=start, active=primary)

    train_step = make_train_step(
        graphdef,
        kind=task.kind,
        label_smoothing=config.optimizer.label_smoothing,
        seed=config.seed,
        state_sharding=state_sharding,
    )
    eval_step = make_eval_step(graphdef, kind=task.kind)
    redraw_key = jax.random.fold_in(jax.random.key(config.seed), 0x2EDA)
    compiled, window, timer = None, None, None
    bar = tqdm.tqdm(total=config.num_train_steps, initial=start, disable=not progress, desc=config.task)
    for step in range(start, config.num_train_steps):
        every = config.attention.redraw_every  # every site has this policy: merge the modules only when due
        if every and step % every == 0:
            model, optimizer = nnx.merge(graphdef, state)
            if redraw_projections(model, jax.random.fold_in(redraw_key, step), step=step):
                state = jax.device_put(nnx.state((model, optimizer)), state_sharding)
        batch = sharding.global_batch(next(iterator), mesh)
        if compiled is None:
            compiled = train_step.lower(state, batch, jnp.int32(step)).compile()
        state, sums = compiled(state, batch, jnp.int32(step))
        window = _add(window, sums)
        done = step + 1
        bar.update()
        if timer is None:  # time from the end of this process's first step (compilation, warm-up)
            jax.block_until_ready(sums)
            timer = (time.perf_counter(), done)
        if done % config.log_every == 0 or done == config.num_train_steps:
            totals = jax.device_get(window)
            metrics = summarize(totals, kind=task.kind)
            if done > timer[1]:
                seconds = (time.perf_counter() - timer[0]) / (done - timer[1])
                tokens = totals["tokens"] / (done - (done - 1) // config.log_every * config.log_every)
                metrics |= {"step_time_s": seconds, "tokens_per_s": float(tokens) / seconds}
            metrics["learning_rate"] = float(schedule(step))
            writer.write(done, "train", metrics)
            bar.set_postfix(loss=f"{metrics['loss']:.3f}")
            window, timer = None, (time.perf_counter(), done)
        if done % config.eval_every == 0 or done == config.num_train_steps:
            eval_metrics = evaluate(eval_step, state, task, config, mesh)
            writer.write(done, "eval", eval_metrics)
            timer = (time.perf_counter(), done)  # evaluation time is not step time
        if done % config.checkpoint_every == 0 or done == config.num_train_steps:
            checkpoints.save(done, state, iterator)
            timer = (time.perf_counter(), done)
    bar.close()
    writer.close()
    checkpoints.close()
    return _finish(workdir, config, task, num_params, compiled, write=primary)


def _finish(
    workdir: str, config: ml_collections.ConfigDict, task: Task, num_params: int, compiled, *, write: bool
) -> dict:
    """The run's results; ``write``: also ``curves.png`` and ``results.json`` (a finished workdir keeps its own)."""
    path = os.path.join(workdir, "results.json")
    if compiled is None and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    records = read_metrics(workdir)
    step_times = [r["step_time_s"] for r in records if r["split"] == "train" and "step_time_s" in r]
    tokens = [r["tokens_per_s"] for r in records if r["split"] == "train" and "tokens_per_s" in r]
    results = {
        "task": config.task,
        "kind": task.kind,
        "attention": config.attention.variant,
        "num_features": config.attention.num_features if config.attention.kind != "softmax" else None,
        "steps": config.num_train_steps,
        "parameters": int(num_params),
        "eval": [r for r in records if r["split"] == "eval"][-1],
        "step_time_s": float(np.median(step_times)) if step_times else None,
        "tokens_per_s": float(np.median(tokens)) if tokens else None,
        "step_memory_bytes": _memory_bytes(compiled) if compiled is not None else None,
        "devices": jax.device_count(),
        "backend": jax.default_backend(),
    }
    if write:
        plot_curves(workdir, ("loss", "accuracy") + (("perplexity",) if task.kind == "lm" else ()))
        write_atomic(path, json.dumps(results, indent=2) + "\n")
    return results
