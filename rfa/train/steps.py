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

import functools

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
    """``(state, batch, step) -> (state, sums)``: one optimizer step, jitted with the state donated.

    The dropout key of ``seed`` is an argument of the compiled program, not a constant in it: the runs of one model
    (the seeds of a study, a run resumed in the same process) share one jitted function (:func:`_jitted_train_step`)
    and so one compilation. ``.lower(state, batch, step).compile()`` gives the compiled step, called the same way.
    """
    dropout_key = jax.random.key_data(jax.random.fold_in(jax.random.key(seed), 0x0D12))
    return _Bound(_jitted_train_step(graphdef, kind, label_smoothing, _Frozen(state_sharding)), dropout_key)


def make_eval_step(graphdef: nnx.GraphDef, *, kind: str):
    """``(state, batch) -> sums`` with dropout off and no label smoothing, jitted (one jitted function per model and
    kind, shared by every evaluation of them in the process)."""
    return _jitted_eval_step(graphdef, kind)


class _Frozen:
    """A pytree (``state_sharding``, or None) as a hashable key: its structure and leaves."""

    def __init__(self, tree):
        self.tree = tree
        leaves, treedef = jax.tree.flatten(tree)
        self._key = (treedef, tuple(leaves))

    def __eq__(self, other):
        return isinstance(other, _Frozen) and self._key == other._key

    def __hash__(self):
        return hash(self._key)


# Jitted steps by (graphdef, options): JAX keeps the traced and compiled programs of a jitted function, so a new
# run of an equal model reuses them. A few are kept: a study trains its seeds of one model one after another.
# jax.clear_caches() drops their compiled programs as it does every other function's.
@functools.lru_cache(maxsize=16)
def _jitted_train_step(graphdef: nnx.GraphDef, kind: str, label_smoothing: float, state_sharding: _Frozen):
    def train_step(state, batch, step, dropout_key):
        model, optimizer = nnx.merge(graphdef, state)
        nnx.reseed(model, dropout=jax.random.fold_in(jax.random.wrap_key_data(dropout_key), step))

        def objective(model):
            sums = metric_sums(model, batch, kind=kind, label_smoothing=label_smoothing)
            return sums["loss"] / jnp.maximum(sums["weight"], 1.0), sums

        grads, sums = nnx.grad(objective, has_aux=True)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), sums

    return jax.jit(train_step, donate_argnums=0, out_shardings=(state_sharding.tree, None))


@functools.lru_cache(maxsize=16)
def _jitted_eval_step(graphdef: nnx.GraphDef, kind: str):
    def eval_step(state, batch):
        model, _ = nnx.merge(graphdef, state)
        model.eval()
        return metric_sums(model, batch, kind=kind)

    return jax.jit(eval_step)


class _Bound:
    """A jitted function with its last arguments bound: called, lowered and compiled with the others alone."""

    def __init__(self, function, *bound):
        self._function, self._bound = function, bound

    def __call__(self, *args):
        return self._function(*args, *self._bound)

    def lower(self, *args) -> _Bound:
        return _Bound(self._function.lower(*args, *self._bound), *self._bound)

    def compile(self) -> _Bound:  # of a lowered function: the compiled one, bound alike
        return _Bound(self._function.compile(), *self._bound)

    def __getattr__(self, name):  # memory_analysis, cost_analysis, as_text, ...
        return getattr(self._function, name)
