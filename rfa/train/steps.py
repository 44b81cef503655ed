"""The jitted train and eval steps of every task kind.

Steps are pure functions of ``(state, batch, step)`` where ``state = nnx.split((model,
optimizer))[1]``: they merge the state into modules, run, and split again, so ``jax.jit`` can
donate the state and keep its sharding. What a step measures is its task kind's
(``rfa.tasks.TaskKind.metric_sums``): sums that add across steps, devices and evaluation batches,
which :func:`summarize` turns into means. ``loss`` is the training objective (label-smoothed when
smoothing is on); the reported loss is the kind's own summary. Dropout keys are
``fold_in(key(seed), step)`` set by ``nnx.reseed``, so a step's randomness depends only on the seed and the
step — a resumed run repeats it exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.tasks import task_kind


def metric_sums(model: nnx.Module, batch: dict, *, kind: str, label_smoothing: float = 0.0) -> dict:
    """The sums of a batch that the task kind ``kind`` measures (``TaskKind.metric_sums``)."""
    return task_kind(kind).metric_sums(model, batch, label_smoothing=label_smoothing)


def summarize(sums: dict, *, kind: str) -> dict:
    """Means from metric sums, as the task kind ``kind`` reports them (``TaskKind.summarize``)."""
    return task_kind(kind).summarize({name: float(value) for name, value in sums.items()})


def make_train_step(graphdef: nnx.GraphDef, *, kind: str, label_smoothing: float, seed: int, state_sharding=None):
    """``(state, batch, step) -> (state, sums)``: one optimizer step, jitted with the state donated."""
    dropout_key = jax.random.fold_in(jax.random.key(seed), 0x0D12)

    def train_step(state, batch, step):
        model, optimizer = nnx.merge(graphdef, state)
        nnx.reseed(model, dropout=jax.random.fold_in(dropout_key, step))

        def objective(model):
            sums = metric_sums(model, batch, kind=kind, label_smoothing=label_smoothing)
            return sums["loss"] / jnp.maximum(sums["weight"], 1.0), sums

        grads, sums = nnx.grad(objective, has_aux=True)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), sums

    return jax.jit(train_step, donate_argnums=0, out_shardings=(state_sharding, None))


def make_eval_step(graphdef: nnx.GraphDef, *, kind: str):
    """``(state, batch) -> sums`` with dropout off and no label smoothing, jitted."""

    def eval_step(state, batch):
        model, _ = nnx.merge(graphdef, state)
        model.eval()
        return metric_sums(model, batch, kind=kind)

    return jax.jit(eval_step)
