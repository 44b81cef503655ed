"""``train_and_evaluate(config, workdir)``: the training loop, resumable from its workdir.

The loop builds the task's data, model and optimizer, restores the newest checkpoint of the workdir (model,
optimizer, data position, step), and then runs jitted steps on a device mesh, redrawing random projections on
the config's schedule, logging averaged training metrics every ``log_every`` steps, evaluating on the
validation split every ``eval_every`` steps, and checkpointing every ``checkpoint_every`` steps and at the
end. The test split is evaluated once, on the final checkpoint, when training ends: select steps and settings
by the validation metrics, and read test only for the chosen run. A run killed at any moment and started again
on the same workdir ends with exactly the metrics of an uninterrupted run (all but the wall-clock ones, step
time and tokens/s): batches, dropout keys and redraw keys depend only on the seed and the step. SIGINT
(Ctrl-C) and SIGTERM stop a run after the step in progress: it saves that step's checkpoint and raises
:class:`TrainingInterrupted`. With several processes (``rfa.train.initialize_distributed``), a signal to any
of them stops all of them after the same step, each process reads its block of rows of the same global batches
(only those examples, where the task's rows are its examples), so the run's metrics are those of one process with
as many devices, and a run resumes on another number of processes and devices; process 0 writes the metrics,
config and results, and the checkpoints are written by all (orbax).

The workdir then holds ``config.json``, ``metrics.jsonl``, ``tensorboard/``, ``checkpoints/``,
``curves.png`` and ``results.json`` (final validation and test metrics, step time, tokens/s, memory).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import tqdm
from flax import nnx
from jax.experimental import multihost_utils

from rfa import checks
from rfa.data.pipeline import examples_read, global_position, local_position
from rfa.models import redraw_projections
from rfa.models import sharding as model_sharding
from rfa.tasks import Task, eval_batches, task_kind, train_batches
from rfa.train import sharding
from rfa.train.checkpoint import Checkpoints
from rfa.train.config import EXECUTION_FIELDS, build_model, check_config, upgrade_saved
from rfa.train.metrics import MetricWriter
from rfa.train.optim import make_optimizer, make_schedule
from rfa.train.results import finish
from rfa.train.steps import make_eval_step, make_train_step, summarize
from rfa.workdir import ConfigError, check_local, record_config


def _check_batch(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> None:
    """The global batch must split evenly over data devices and processes (each process keeps a block of rows)."""
    devices, processes = mesh.shape["data"], jax.process_count()
    if config.batch_size % devices or config.batch_size % processes:
        raise ConfigError(
            f"config.batch_size = {config.batch_size} must be divisible by the {devices} data-parallel devices "
            f"(mesh.data) and the {processes} processes."
        )


def _agreed_signal(received: list[int]) -> int | None:
    """The signal that stops the run, agreed by every process: this one's, or (several processes) the first
    any process received, so that all stop after the same step."""
    if jax.process_count() == 1:
        return received[0] if received else None
    signals = multihost_utils.process_allgather(np.int32(received[0] if received else 0))
    stopping = [int(s) for s in np.ravel(signals) if s]
    return stopping[0] if stopping else None


def _add(total: dict | None, sums: dict) -> dict:
    return sums if total is None else jax.tree.map(jnp.add, total, sums)


class TrainingInterrupted(Exception):  # noqa: N818  (a requested stop, like KeyboardInterrupt)
    """SIGINT or SIGTERM stopped training; the checkpoint of the last completed step is saved.

    Running ``train_and_evaluate`` again on the same workdir resumes from that checkpoint and ends
    with the metrics of an uninterrupted run.

    Attributes:
      step: the last completed step, the one checkpointed.
      signal: the number of the signal received.
      checkpoint: the directory of the checkpoint.
      exit_status: ``128 + signal`` (130 for SIGINT, 143 for SIGTERM), the status shells expect.

    Example:
      >>> print(TrainingInterrupted(123, signal.SIGINT, "/tmp/run/checkpoints/123"))
      interrupted by SIGINT at step 123: checkpoint saved to /tmp/run/checkpoints/123
    """

    def __init__(self, step: int, signum: int, checkpoint: str):
        self.step, self.signal, self.checkpoint = step, signum, checkpoint
        self.exit_status = 128 + signum
        super().__init__(
            f"interrupted by {signal.Signals(signum).name} at step {step}: checkpoint saved to {checkpoint}"
        )


@contextlib.contextmanager
def _deferred_signals() -> Iterator[list[int]]:
    """Records SIGINT and SIGTERM in the yielded list instead of acting on them; restores the handlers after.

    The loop checks the list between steps (with several processes, all of them agree on it after each step:
    :func:`_agreed_signal`), so a signal cuts off neither a step, nor a checkpoint write, nor the input
    pipeline in the middle of a batch. A second signal while one is pending raises ``KeyboardInterrupt``: an
    insistent user can still stop a step that hangs. Signals that are ignored (a background job of a script)
    stay ignored; off the main thread nothing is installed.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum, frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)

    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, record)
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def evaluate(eval_step, state, task: Task, config: ml_collections.ConfigDict, mesh, split: str) -> dict:
    """Metrics of ``state`` on the TFDS ``split`` (``config.eval_batches`` batches, 0: all).

    Every process reads its rows of the same global batches, so the number of (collective) evaluation steps is
    the same on every process.
    """
    batches = eval_batches(
        task,
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        split=split,
        max_batches=config.eval_batches or None,
        shard=sharding.process_shard(),
        **task_kind(task.kind).data_options(config),
    )
    total = None
    for batch in batches:
        total = _add(total, eval_step(state, sharding.global_batch(batch, mesh)))
    return summarize(jax.device_get(total), kind=task.kind)


def initial_state(config: ml_collections.ConfigDict, task: Task) -> tuple[nnx.GraphDef, nnx.State]:
    """``nnx.split((model, optimizer))`` of a freshly initialized run of ``config``."""
    model = build_model(config, task)
    optimizer = json.dumps(config.optimizer.to_dict(), sort_keys=True)
    tx = _optimizer(optimizer, config.num_train_steps, config.model.d_model)
    return nnx.split((model, nnx.Optimizer(model, tx, wrt=nnx.Param)))


@functools.lru_cache(maxsize=16)
def _optimizer(optimizer: str, num_steps: int, d_model: int):
    """One optax transformation per optimizer config (its JSON): the transformation is part of the graphdef, and
    runs of equal graphdefs share their jitted steps (``rfa.train.steps``)."""
    return make_optimizer(ml_collections.ConfigDict(json.loads(optimizer)), num_steps=num_steps, d_model=d_model)


def train_and_evaluate(
    config: ml_collections.ConfigDict,
    workdir: str,
    *,
    progress: bool = True,
    on_step: Callable[[int], None] | None = None,
    initialize: Callable[[nnx.Module], None] | None = None,
) -> dict:
    """Trains ``config``'s model on its task, resuming from ``workdir``; returns the contents of ``results.json``.

    Args:
      config: a training config (``rfa.train.config.base_config`` schema), e.g. from ``rfa/configs/tasks/sort.py``.
      workdir: where everything the run produces goes; a workdir of a different config is refused
        with ``ConfigError`` before anything in it is touched.
      progress: show a tqdm progress bar.
      on_step: called with the number of completed steps after each step, once that step's
        metrics, evaluation and checkpoint are written (monitoring, or tests that interrupt a run
        at a known step).
      initialize: changes the freshly built model in place before a new run's first step (e.g.
        weights from another model: ``rfa.experiments.studies.distillation`` fine-tunes a distilled student); a
        resumed run restores its checkpoint instead.

    Returns:
      the run's results, also in ``results.json``: ``validation`` (the last validation record), ``test`` (the
      final checkpoint's metrics on the test split, evaluated once, when training ends), step time, tokens/s,
      memory.

    Raises:
      TrainingInterrupted: SIGINT or SIGTERM arrived before the last step; the checkpoint of the
        last completed step is saved (a signal during the last step lets the run finish).

    Example:
      >>> import tempfile
      >>> from rfa.train.config import task_config
      >>> config = task_config("sort", "positive,quick", data_dir=tempfile.mkdtemp())
      >>> config.num_train_steps = 2
      >>> results = train_and_evaluate(config, tempfile.mkdtemp(), progress=False)
      >>> results["steps"], 0.0 <= results["validation"]["accuracy"] <= 1.0, 0.0 <= results["test"]["accuracy"] <= 1.0
      (2, True, True)
    """
    check_local(workdir)
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    try:
        mesh = sharding.make_mesh(config.mesh.data, config.mesh.model, config.mesh.sequence)
        state_sharding = model_sharding.state_sharding(state, mesh)
    except ValueError as error:
        raise ConfigError(f"config.mesh: {error}") from error
    _check_batch(config, mesh)
    num_params = sum(x.size for x in jax.tree.leaves(nnx.split_state(state, nnx.Param, ...)[0]))
    schedule = make_schedule(config.optimizer, num_steps=config.num_train_steps, d_model=config.model.d_model)
    state = sharding.put(state, state_sharding)

    # Every process reads its block of rows of the same global batches (same seed): a run gives the same batches,
    # and so the same metrics, whatever the number of processes, and resumes on another number.
    shard, rows_are_examples = sharding.process_shard(), task_kind(task.kind).rows_are_examples
    iterator = iter(
        train_batches(
            task,
            data_dir=config.data_dir,
            batch_size=config.batch_size,
            max_length=config.max_length,
            seed=config.seed,
            shard=shard,
            **task_kind(task.kind).data_options(config),
        )
    )
    examples = 0  # read into this launch's training batches by this process
    primary = jax.process_index() == 0
    record_config(
        workdir, config, execution_fields=EXECUTION_FIELDS, write=primary, upgrade=upgrade_saved
    )  # data and model exist
    checkpoints = Checkpoints(
        os.path.join(workdir, "checkpoints"), keep=config.keep_checkpoints, keep_every=config.keep_checkpoints_every
    )
    start, state, position = checkpoints.restore_latest(state)
    if position is not None:
        try:
            iterator.set_state(local_position(position, shard, rows_are_examples=rows_are_examples))
        except ValueError as error:
            raise ConfigError(f"cannot resume step {start} on {shard[1]} processes: {error}") from error

    def saved_position() -> dict:
        return global_position(iterator.get_state(), shard, rows_are_examples=rows_are_examples)

    if start == 0 and initialize is not None:
        model, optimizer = nnx.merge(graphdef, state)
        initialize(model)
        state = sharding.put(nnx.state((model, optimizer)), state_sharding)
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
    compiled, timer = None, None
    window = checkpoints.pending_metrics(start)  # sums of the steps since the last log, if stopped between logs
    bar = tqdm.tqdm(total=config.num_train_steps, initial=start, disable=not progress, desc=config.task)
    with _deferred_signals() as received, contextlib.ExitStack() as closing:
        # iterator.close() stops grain's prefetch threads now rather than at interpreter exit
        for close in (bar.close, writer.close, checkpoints.close, iterator.close):
            closing.callback(close)
        closing.enter_context(jax.set_mesh(mesh))  # the steps trace under it: kernelized sites see its sequence axis
        closing.enter_context(checks.enabled(config.checks))  # read while the steps trace
        for step in range(start, config.num_train_steps):
            every = config.attention.redraw_every  # every site has this policy: merge the modules only when due
            if every and step % every == 0:
                model, optimizer = nnx.merge(graphdef, state)
                if redraw_projections(model, jax.random.fold_in(redraw_key, step), step=step):
                    state = sharding.put(nnx.state((model, optimizer)), state_sharding)
            before = examples_read()
            batch = sharding.global_batch(next(iterator), mesh)
            examples += examples_read() - before
            if compiled is None:
                compiled = train_step.lower(state, batch, jnp.int32(step)).compile()
                bar.unpause()  # else the first interval holds the compilation: ETA = steps left x compile time
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
                writer.write(done, "validation", evaluate(eval_step, state, task, config, mesh, task.validation_split))
                timer = (time.perf_counter(), done)  # evaluation time is not step time
            if done % config.checkpoint_every == 0 or done == config.num_train_steps:
                checkpoints.save(done, state, saved_position())
                timer = (time.perf_counter(), done)
            if on_step is not None:
                on_step(done)
            stop = _agreed_signal(received) if done < config.num_train_steps else None
            if stop is not None:
                if done % config.checkpoint_every:
                    checkpoints.save(done, state, saved_position(), metrics=window)
                raise TrainingInterrupted(done, stop, checkpoints.step_directory(done))
        path = os.path.join(workdir, "results.json")
        if _finished_before(path, compiled):
            with open(path) as f:
                return json.load(f)
        test = evaluate(eval_step, state, task, config, mesh, task.test_split)  # once, on the final state
    input_work = np.ravel(multihost_utils.process_allgather(np.int64(examples))) / (config.num_train_steps - start)
    return finish(workdir, config, task, num_params, compiled, test, input_work, write=primary)


def _finished_before(path: str, compiled) -> bool:
    """No step ran and ``results.json`` exists: a finished workdir keeps its results (as process 0 sees them, so
    that every process skips the test evaluation, a collective, or runs it)."""
    finished = compiled is None and os.path.exists(path)
    if jax.process_count() > 1:
        finished = bool(multihost_utils.broadcast_one_to_all(np.int32(finished)))
    return finished
