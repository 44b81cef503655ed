"""Sequence-parallel kernelized attention: each device holds a contiguous block of the sequence.

Inside ``jax.shard_map`` over a mesh axis, ``rfa.kernelized_attention(..., sequence_axis=NAME)``
treats q, k, v as this device's block (device order along the axis is sequence order) and returns
this block's outputs. Only states cross devices (LASP-2: Sun et al., "LASP-2: Rethinking Sequence
Parallelism for Linear Attention and Its Hybrid", 2025), so communication is O(P·F·d), whatever L:

- bidirectional: every device forms the state of its keys, ``(kv_p, R_p)``; the global state is
  their sum at the largest reference, ``R = max_p R_p`` (``pmax``) and ``kv = Σ_p kv_p exp(R_p - R)``
  (``psum``), which every query then reads;
- causal: every device forms the state of its keys as it stands at the block's end (key j decayed
  by the decays after it), ``(kv_p, R_p)``, and its block's total log-decay ``Γ_p``; these are
  all-gathered, and device p starts its chunked causal pass from the state of the blocks before it,
  ``Σ_{q<p} S_q exp(Σ_{q<r<p} Γ_r)``.

The stabilizer's references combine as maxima, taken without gradient (any reference gives the same
result); gradients flow through the collectives by autodiff (``all_gather``'s transpose is a
``psum_scatter``), with no custom VJP. The state returned with ``return_state=True`` is the state
after the whole sequence, the same on every device.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from rfa.attention.state import LOWEST, RecurrentState

Array = jax.Array


def check_axis(axis: str) -> int:
    """The size of the mesh axis ``axis`` of the enclosing ``shard_map``; a ValueError if there is none."""
    try:
        return jax.lax.axis_size(axis)
    except NameError:
        raise ValueError(
            f"sequence_axis={axis!r} names no mesh axis of an enclosing jax.shard_map: call kernelized_attention "
            "inside shard_map over a mesh with that axis (rfa.attention.sequence_parallel_attention does it for "
            "you), or pass sequence_axis=None."
        ) from None


def check_key_padding(mask) -> None:
    """A mask of sequence-parallel attention must be key padding (a dense one cannot be split by blocks)."""
    if mask is not None and (jnp.ndim(mask) < 2 or jnp.shape(mask)[-2] != 1):
        raise ValueError(
            f"with sequence_axis, mask must be key padding of this block, broadcastable to [batch..., heads, 1, "
            f"kv_len], got shape {tuple(jnp.shape(mask))}; causal attention is is_causal=True (a dense causal mask "
            "of one block is not the block's part of the sequence's mask)."
        )


def _sum_states(kv: Array, log_scale: Array) -> RecurrentState:
    """``Σ_n kv_n exp(log_scale_n)`` as one state: ``kv [n, ..., F, D]``, ``log_scale [n, ...]`` (-inf: none)."""
    ref = jnp.maximum(jax.lax.stop_gradient(jnp.max(log_scale, axis=0)), LOWEST)
    weights = jnp.exp(log_scale - ref)[..., None, None]
    return RecurrentState(jnp.sum(kv * weights, axis=0), ref)


def bidirectional(attend: Callable, axis: str, q, k, v, initial_state: RecurrentState | None):
    """Every query attends to every device's keys (and the initial state): ``(output, global state)``."""
    _, local = attend(q[..., :0, :, :], k, v, causal=False, log_decay=None, initial_state=None)
    ref = jnp.maximum(jax.lax.stop_gradient(jax.lax.pmax(local.log_reference, axis)), LOWEST)
    kv = jax.lax.psum(local.kv * jnp.exp(local.log_reference - ref)[..., None, None], axis)
    state = RecurrentState(kv, ref)
    if initial_state is not None:  # the same on every device: counted once
        state = _sum_states(jnp.stack([state.kv, initial_state.kv]),
                            jnp.stack([state.log_reference, initial_state.log_reference]))  # fmt: skip
    no_key = k[..., :0, :, :]
    out, _ = attend(q, no_key, v[..., :0, :, :], causal=False, log_decay=None, initial_state=state)
    return out, state


def causal(attend: Callable, axis: str, q, k, v, log_decay, block_decay, initial_state: RecurrentState | None):
    """Causal attention across the devices' blocks: ``(this block's output, the state after the sequence)``.

    ``block_decay [batch..., heads]`` is this block's total log-decay Γ_p over its kept keys (0 without decay).
    """
    _, local = attend(q[..., :0, :, :], k, v, causal=False, log_decay=log_decay, initial_state=None)
    kvs, refs, totals = (jax.lax.all_gather(x, axis) for x in (local.kv, local.log_reference, block_decay))
    size, index = kvs.shape[0], jax.lax.axis_index(axis)
    blocks = jnp.arange(size)
    if initial_state is not None:  # the initial state enters as a block before the first, with no keys of its own
        kvs = jnp.concatenate([initial_state.kv[None], kvs])
        refs = jnp.concatenate([initial_state.log_reference[None], refs])
        totals = jnp.concatenate([jnp.zeros_like(totals[:1]), totals])
        blocks = jnp.concatenate([jnp.array([-1]), blocks])

    def decayed_to(end):
        """Each gathered state's log-scale at the start of block ``end``: decayed by the blocks in between."""
        between = (blocks[:, None] < jnp.arange(size)[None, :]) & (jnp.arange(size)[None, :] < end)  # [q, r]
        decay = jnp.tensordot(between.astype(totals.dtype), totals[-size:], axes=(1, 0))  # Σ_{q<r<end} Γ_r
        return jnp.where((blocks < end).reshape((-1,) + (1,) * (refs.ndim - 1)), refs + decay, -jnp.inf)

    prefix = _sum_states(kvs, decayed_to(index))
    out, _ = attend(q, k, v, causal=True, log_decay=log_decay, initial_state=prefix)
    return out, _sum_states(kvs, decayed_to(size))


def _token_spec(fm, name: str, value, axis: str):
    """The spec of a map parameter: split along the length if it is per token (``fm.token_params``), else replicated."""
    spec = jax.sharding.PartitionSpec
    if name in fm.token_params:
        event, ndim = fm.event_ndim(name), jnp.ndim(value)
        if ndim > event and jnp.shape(value)[-1 - event] != 1:
            return spec(*([None] * (ndim - 1 - event)), axis)
    return spec()


def sequence_parallel_attention(
    q, k, v, *, axis: str, mesh: jax.sharding.Mesh | None = None, mask=None, log_decay=None, projection=None,
    feature_params: dict | None = None, initial_state: RecurrentState | None = None, return_state: bool = False,
    **options,
):  # fmt: skip
    """``rfa.kernelized_attention`` with the sequence split over the mesh axis ``axis`` (it shards for you).

    Only ``axis`` is manual inside: the other axes of the mesh (data, model) keep the shardings XLA gives
    the arrays, so this runs inside a jitted, GSPMD-sharded training step as well as on its own.

    Args:
      q, k, v: ``[batch..., L, heads, d]`` global arrays; L must be divisible by the axis size (pad the
        sequence and mask the padding otherwise).
      axis: the mesh axis the sequence is split along; device order along it is sequence order.
      mesh: a ``jax.sharding.Mesh`` with the axis ``axis``; None takes the mesh set by ``jax.set_mesh``.
      mask: None or key padding broadcastable to ``[batch..., heads, 1, L]``.
      log_decay: ``[batch..., L, heads]`` (causal).
      projection, feature_params: as in ``rfa.kernelized_attention``; a per-token parameter (the map's
        ``token_params`` with a length axis, e.g. rfa's ``key_log_weight [batch..., heads, L]``) is split
        along L like the tokens, every other one is replicated.
      initial_state, return_state: as in ``rfa.kernelized_attention`` (the state is replicated).
      **options: the other keywords of ``rfa.kernelized_attention`` (``feature_map``, ``is_causal``, ...).

    Returns:
      ``[batch..., L, heads, d_v]`` (sharded along L), or ``(output, state)``.

    Example:
      >>> mesh = jax.make_mesh((len(jax.devices()),), ("seq",))
      >>> W = rfa.sample_projection(jax.random.key(0), 32, 16)
      >>> x = jnp.ones((2, 8 * len(jax.devices()), 4, 16)) * 0.1
      >>> rfa.attention.sequence_parallel_attention(x, x, x, mesh=mesh, axis="seq", feature_map="positive",
      ...                                           projection=W, is_causal=True).shape[1] == x.shape[1]
      True
    """
    from rfa.attention.kernelized import kernelized_attention  # the local attention of each device
    from rfa.random_features.feature_maps import feature_map as lookup_feature_map

    given_mesh = mesh is not None
    mesh = mesh if given_mesh else jax.sharding.get_abstract_mesh()
    if axis not in mesh.axis_names:
        where = (
            "the mesh set by jax.set_mesh" if mesh.axis_names else "no mesh (pass mesh= or call inside jax.set_mesh)"
        )
        raise ValueError(f"mesh has no axis {axis!r}; its axes are {tuple(mesh.axis_names)} ({where}).")
    check_key_padding(mask)
    size, length = mesh.shape[axis], q.shape[-3]
    if length % size or k.shape[-3] % size:
        raise ValueError(
            f"the sequence lengths (q_len={length}, kv_len={k.shape[-3]}) must be divisible by the size of mesh axis "
            f"{axis!r} ({size}): pad the sequences to a multiple of {size} and mask the padding (mask=key padding)."
        )
    fm = lookup_feature_map(options["feature_map"]) if "feature_map" in options else None
    spec = jax.sharding.PartitionSpec
    tokens = spec(*([None] * (q.ndim - 3)), axis)  # [batch..., L, ...] split along L
    feature_params = dict(feature_params or {})
    numbers = {name: value for name, value in feature_params.items() if isinstance(value, int | float)}  # static
    arrays = {name: value for name, value in feature_params.items() if name not in numbers}
    args = {"q": q, "k": k, "v": v, "mask": mask, "log_decay": log_decay, "initial_state": initial_state,
            "projection": projection, "feature_params": arrays or None}  # fmt: skip
    specs = {
        "q": tokens, "k": tokens, "v": tokens, "log_decay": tokens,
        "mask": None if mask is None else spec(*([None] * (jnp.ndim(mask) - 1)), axis), "initial_state": spec(),
        "projection": spec(),
        "feature_params": {name: _token_spec(fm, name, value, axis) for name, value in arrays.items()},
    }  # fmt: skip
    given = {name: value for name, value in args.items() if value is not None}
    in_specs = {name: specs[name] for name in given}
    if given_mesh:  # arrays committed elsewhere (or nowhere) are laid out on this mesh first
        given = jax.tree.map(
            lambda s, value: jax.tree.map(lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s)), value),
            in_specs, given, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec),
        )  # fmt: skip

    def local(given):
        return kernelized_attention(
            given["q"], given["k"], given["v"], mask=given.get("mask"), log_decay=given.get("log_decay"),
            projection=given.get("projection"), feature_params={**numbers, **given.get("feature_params", {})},
            initial_state=given.get("initial_state"), return_state=True, sequence_axis=axis, **options,
        )  # fmt: skip

    # The state is the same on every device by construction (sums of gathered states), which shard_map's
    # replication check cannot infer through axis_index; the tests compare it with one device's.
    out, state = jax.shard_map(
        local, mesh=mesh, in_specs=(in_specs,), out_specs=(tokens, spec()),
        axis_names={axis}, check_vma=False,
    )(given)  # fmt: skip
    return (out, state) if return_state else out
