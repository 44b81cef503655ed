"""Saving and restoring an NNX model with rfa's layers: its parameters and its random projections together.

A kernelized layer's projection W is a :class:`~rfa.layers.RandomProjection` variable, not an ``nnx.Param``:
optimizers leave it alone, and a checkpoint of ``nnx.state(model, nnx.Param)`` leaves it out. Restored into a
model built anew, such parameters meet that model's own W, drawn from its construction seed, and the outputs
change with no error. :func:`save` keeps every variable but the decode cache and the rng streams (parameters,
projections, fitted and batch statistics); :func:`restore` refuses, in one line, a checkpoint that lacks a
projection the model has. Both are ``rfa.nnx.save`` and ``rfa.nnx.restore``.
"""

from __future__ import annotations

import os

import jax
from flax import nnx

from rfa._validation import InputError
from rfa.layers.feature_variables import RandomProjection

SAVED = nnx.Not(nnx.Any(nnx.Cache, nnx.RngState))  # what a checkpoint of a model holds


def _leaf_paths(tree) -> list[str]:
    """``a/b/c`` of every leaf of a saved (or to be saved) state, without the ``value`` of each variable."""
    paths = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keys = [str(getattr(key, "key", getattr(key, "idx", key))) for key in path]
        paths.append("/".join(keys[:-1] if keys and keys[-1] == "value" else keys))
    return paths


def save(path: str | os.PathLike, model: nnx.Module) -> None:
    """Writes ``model``'s parameters, random projections and other persistent variables (not its decode cache
    or rng streams) as an orbax checkpoint at ``path`` (a directory that must not exist yet).

    Example:
      >>> layer = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(0))
      >>> import tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "layer")
      >>> rfa.nnx.save(path, layer)
      >>> fresh = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(1))
      >>> rfa.nnx.restore(path, fresh)
      >>> bool(jnp.all(fresh.attention_fn.projection[...] == layer.attention_fn.projection[...]))
      True
    """
    import orbax.checkpoint as ocp  # imported by who saves, not by every import of rfa

    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(os.path.abspath(path), nnx.state(model, SAVED))
    checkpointer.wait_until_finished()


def restore(path: str | os.PathLike, model: nnx.Module) -> None:
    """Reads the checkpoint at ``path`` into ``model`` (in place), after checking that it holds every random
    projection of ``model``; one saved from ``nnx.state(model, nnx.Param)`` raises :class:`rfa.InputError`
    saying what to do, instead of restoring parameters beside a projection they were not trained with."""
    import orbax.checkpoint as ocp

    checkpointer = ocp.StandardCheckpointer()
    path = os.path.abspath(path)
    saved = set(_leaf_paths(checkpointer.metadata(path).item_metadata))
    missing = [name for name in _leaf_paths(nnx.to_pure_dict(nnx.state(model, RandomProjection))) if name not in saved]
    if missing:
        raise InputError(
            f"{path} holds no random projection {missing[0]} ({len(missing)} missing): it was saved without the "
            "layers' RandomProjection variables (nnx.state(model, nnx.Param) leaves them out); save with "
            "rfa.nnx.save(path, model), or draw new ones with rfa.nnx.redraw and fine-tune."
        )
    nnx.update(model, checkpointer.restore(path, nnx.state(model, SAVED)))
