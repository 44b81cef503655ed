"""A finished training run read back: ``load_model(workdir)`` (optionally at another length) and
``evaluate_model(model, config, split)``, as the training loop (:mod:`rfa.train.loop`) evaluates."""

from __future__ import annotations

import json
import os

import jax
import ml_collections
import optax
from flax import nnx

from rfa.tasks import Task
from rfa.train import sharding
from rfa.train.checkpoint import CheckpointError, Checkpoints
from rfa.train.config import build_model, check_config, upgrade_saved
from rfa.train.loop import evaluate, initial_state
from rfa.train.steps import make_eval_step
from rfa.workdir import ConfigError

_NO_UPDATES = optax.identity()  # one object: equal models then share one jitted evaluation step


def load_model(
    workdir: str, *, max_length: int | None = None
) -> tuple[nnx.Module, ml_collections.ConfigDict, Task, int]:
    """The trained model of a training workdir (evaluation mode), its config and task, and the checkpoint step.

    ``max_length``: build the model for sequences of up to this many tokens instead of the config's (which the
    returned config then holds), to evaluate it beyond the training lengths. Every trained variable carries
    over; the fixed tables derived from the length (sinusoidal positions) are rebuilt. A model whose trained
    variables depend on the length (learned positions, Linformer) cannot change it: a ``ConfigError``.

    Example:
      >>> model, config, task, step = load_model("workdir/train/sort/positive")  # doctest: +SKIP
      >>> longer, config, _, _ = load_model("workdir/train/sort/positive", max_length=72)  # doctest: +SKIP
    """
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        raise ConfigError(f"{workdir!r} is not a training workdir: it has no config.json.")
    with open(path) as f:
        config = ml_collections.ConfigDict(upgrade_saved(json.load(f)))
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    checkpoints = Checkpoints(os.path.join(workdir, "checkpoints"))
    if checkpoints.latest_step() is None:
        raise CheckpointError(f"{workdir!r} has no checkpoint yet: train first (rfa train).")
    step, state, _ = checkpoints.restore_latest(state)
    checkpoints.close()
    state = jax.tree.map(_uncommitted, state)
    model, _ = nnx.merge(graphdef, state)
    if max_length is not None and max_length != config.max_length:
        model = _with_max_length(model, config, task, max_length)
    model.eval()
    return model, config, task, step


def _uncommitted(x):
    """A restored array on one device as a freshly built model holds it: uncommitted, the same values. The restore
    commits it to its device; a jitted call on a model of both kinds (restored weights, fresh RNG streams) then
    returns committed ones, and its next call, on a new signature, compiled again (``rfa decode``: the second
    input; every eager operation on a restored model, too). An array over several devices keeps its sharding."""
    if not isinstance(x, jax.Array) or not x.committed or len(x.sharding.device_set) > 1:
        return x
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = jax.device_put(jax.device_get(jax.random.key_data(x)))
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    return jax.device_put(jax.device_get(x))


def _with_max_length(trained: nnx.Module, config: ml_collections.ConfigDict, task: Task, max_length: int) -> nnx.Module:
    """``trained``'s variables in a model built for ``max_length`` (``config.max_length`` set to it)."""
    trained_length, config.max_length = config.max_length, max_length
    check_config(config)
    model = build_model(config, task)
    kept = nnx.state(trained, nnx.Not(nnx.Cache))  # nnx.Cache: fixed tables, rebuilt for the new length
    for (path, old), new in zip(
        jax.tree.leaves_with_path(kept), jax.tree.leaves(nnx.state(model, nnx.Not(nnx.Cache))), strict=True
    ):
        if old.shape != new.shape:
            raise ConfigError(
                f"the model's trained variable {jax.tree_util.keystr(path)} has shape {old.shape} for "
                f"max_length = {trained_length} and {new.shape} for {max_length}: this model (learned positions, "
                "Linformer) cannot change its length."
            )
    nnx.update(model, kept)
    return model


def evaluate_model(model: nnx.Module, config: ml_collections.ConfigDict, split: str | None = None) -> dict:
    """The metrics of ``model`` on ``split`` of ``config.task`` (default: its test split), as training evaluates
    (``config.eval_batches`` batches of ``config.batch_size`` at ``config.max_length``; 0: the whole split), on one
    device.

    Example:
      >>> model, config, _, _ = load_model("workdir/train/sort/exact", max_length=72)  # doctest: +SKIP
      >>> config.task = "sort_longer"  # strings longer than any seen in training  # doctest: +SKIP
      >>> evaluate_model(model, config)["sequence_accuracy"]  # doctest: +SKIP
    """
    task = check_config(config)
    graphdef, state = nnx.split((model, nnx.Optimizer(model, _NO_UPDATES, wrt=nnx.Param)))
    eval_step = make_eval_step(graphdef, kind=task.kind)
    return evaluate(eval_step, state, task, config, sharding.make_mesh(1, 1), split or task.test_split)
