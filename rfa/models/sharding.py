"""Where a model's parameters lie on a ``(data, sequence, model)`` mesh (:func:`rfa.train.make_mesh`): Megatron-style
tensor parallelism (Shoeybi et al., 2019), every other parameter replicated.

With a ``model`` axis > 1 the attention heads (the q/k/v/gate kernels' head axis, the output kernel's) and the MLP's
hidden units (a dense MLP's, a gated MLP's, every expert's of a mixture) are split over ``model``, and XLA's SPMD
partitioner inserts the matching collectives; the ``data`` axis splits batches, not parameters. A rule is a
parameter's path ending and rank; optimizer moments follow their parameters because their paths end the same way.
:func:`rfa.models.from_pretrained` (``mesh=``) places each checkpoint tensor by these rules as it loads it, and
``rfa train`` its whole state.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rfa._validation import InputError

# (path ending: its last attribute names, parameter rank) -> spec of the heads / hidden-unit axis split over "model".
MODEL_AXIS_RULES = {
    (("query", "kernel"), 3): P(None, "model", None),
    (("key", "kernel"), 3): P(None, "model", None),
    (("value", "kernel"), 3): P(None, "model", None),
    (("gate", "kernel"), 3): P(None, "model", None),  # an attention site's output gate, per head
    (("query", "bias"), 2): P("model", None),
    (("key", "bias"), 2): P("model", None),
    (("value", "bias"), 2): P("model", None),
    (("out", "kernel"), 3): P("model", None, None),
    (("hidden", "kernel"), 2): P(None, "model"),  # the Transformer's MLP
    (("hidden", "bias"), 1): P("model"),
    (("output", "kernel"), 2): P("model", None),
    (("mlp", "gate", "kernel"), 2): P(None, "model"),  # a gated MLP's (SwiGLU) gate, up and down projections
    (("mlp", "up", "kernel"), 2): P(None, "model"),
    (("mlp", "down", "kernel"), 2): P("model", None),
    (("shared", "gate", "kernel"), 2): P(None, "model"),  # a mixture's shared expert
    (("shared", "up", "kernel"), 2): P(None, "model"),
    (("shared", "down", "kernel"), 2): P("model", None),
    (("mlp", "gate"), 3): P(None, None, "model"),  # a mixture's experts, [experts, d_model, hidden] stacked
    (("mlp", "up"), 3): P(None, None, "model"),
    (("mlp", "down"), 3): P(None, "model", None),
}


def parameter_sharding(names: tuple[str, ...], shape: tuple[int, ...], mesh: jax.sharding.Mesh) -> NamedSharding:
    """The ``NamedSharding`` of the parameter at path ``names`` (its attribute names, the last one the parameter's)
    with ``shape``: its rule's split over ``model``, or replicated.

    Example:
      >>> mesh = jax.make_mesh((1, 1, 1), ("data", "sequence", "model"))
      >>> parameter_sharding(("layers", "0", "mlp", "up", "kernel"), (64, 128), mesh).spec
      P()
    """
    model_size = mesh.shape["model"]
    rules = [
        r for (end, rank), r in MODEL_AXIS_RULES.items() if tuple(names[-len(end) :]) == end and rank == len(shape)
    ]
    rule = rules[0] if rules and model_size > 1 else None
    if rule is None:
        return NamedSharding(mesh, P())
    axis = list(rule).index("model")
    if shape[axis] % model_size:
        raise InputError(
            f"{'/'.join(names)} has {shape[axis]} heads/units on its sharded axis, not divisible by mesh.model = "
            f"{model_size}."
        )
    return NamedSharding(mesh, rule)


def _names(path) -> tuple:
    return tuple(str(getattr(key, "key", getattr(key, "name", getattr(key, "idx", key)))) for key in path)


def state_sharding(state, mesh: jax.sharding.Mesh):
    """``NamedSharding`` per leaf of an ``nnx.State`` (:func:`parameter_sharding` of each)."""

    def sharding(path, leaf):
        names = list(_names(path))
        names = names[:-1] if names[-1] == "value" else names  # the Variable's value field, not the V projection
        return parameter_sharding(tuple(names), np.shape(leaf), mesh)

    return jax.tree_util.tree_map_with_path(sharding, state)
