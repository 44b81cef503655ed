"""The sequence-parallel mode: each device holds a contiguous block of the sequence.

Inside ``jax.shard_map`` over a mesh axis, ``rfa.kernelized_attention(..., sequence_axis=NAME)``
treats q, k, v as this device's block (device order along the axis is sequence order) and returns
this block's outputs. Only states cross devices (LASP-2: Sun et al., "LASP-2: Rethinking Sequence
Parallelism for Linear Attention and Its Hybrid", 2025), so communication is O(P·F·d), whatever L:

- bidirectional: every device forms the state of its keys, ``(kv_p, R_p)``; the global state is
  their sum at the largest reference, ``R = max_p R_p`` (``pmax``) and ``kv = Σ_p kv_p exp(R_p - R)``
  (``psum``), which every query then reads;
- causal: every device forms the state of its keys as it stands at the block's end (key j decayed
  by the decays after it), ``(kv_p, R_p)``, and its block's total log-decay ``Γ_p`` (one per feature
  with a per-feature decay); these are all-gathered, and device p starts its chunked causal pass from
  the state of the blocks before it, ``Σ_{q<p} exp(Σ_{q<r<p} Γ_r) ⊙ S_q`` (each feature's row of S
  scaled by its own decay).

The stabilizer's references combine as maxima, taken without gradient (any reference gives the same
result); gradients flow through the collectives by autodiff (``all_gather``'s transpose is a
``psum_scatter``), with no custom VJP. The state returned with ``return_state=True`` is the state
after the whole sequence, the same on every device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError
from rfa.attention.kernelized.bidirectional import bidirectional
from rfa.attention.kernelized.causal import causal
from rfa.attention.kernelized.prepare import Call, per_feature
from rfa.attention.state import LOWEST, RecurrentState

Array = jax.Array


def check_axis(axis: str) -> int:
    """The size of the mesh axis ``axis`` of the enclosing ``shard_map``; a ValueError if there is none."""
    try:
        return jax.lax.axis_size(axis)
    except NameError:
        raise InputError(
            f"sequence_axis={axis!r} names no mesh axis of an enclosing jax.shard_map: call kernelized_attention "
            "inside shard_map over a mesh with that axis (rfa.attention.sequence_parallel_attention does it for "
            "you), or pass sequence_axis=None."
        ) from None


def check_key_padding(mask) -> None:
    """A mask of sequence-parallel attention must be key padding (a dense one cannot be split by blocks)."""
    if mask is not None and (jnp.ndim(mask) < 2 or jnp.shape(mask)[-2] != 1):
        raise InputError(
            f"with sequence_axis, mask must be key padding of this block, broadcastable to [batch..., heads, 1, "
            f"kv_len], got shape {tuple(jnp.shape(mask))}; causal attention is is_causal=True (a dense causal mask "
            "of one block is not the block's part of the sequence's mask)."
        )


def _sum_states(kv: Array, log_scale: Array) -> RecurrentState:
    """``Σ_n kv_n exp(log_scale_n)`` as one state: ``kv [n, ..., F, D]``, ``log_scale [n, ..., 1 or F]`` (one scale
    per state, or per feature: a row of S each; -inf: none)."""
    ref = jnp.maximum(jax.lax.stop_gradient(jnp.max(log_scale, axis=(0, -1))), LOWEST)
    weights = jnp.exp(log_scale - ref[..., None])[..., None]
    return RecurrentState(jnp.sum(kv * weights, axis=0), ref)


def _local_state(call: Call) -> RecurrentState:
    """The state of this block's keys alone (decayed to the block's end), from a query of length 0."""
    _, local = bidirectional(call.replace(q=call.q[..., :0, :, :], initial_state=None))
    return local


def _bidirectional(call: Call, axis: str) -> tuple[Array, RecurrentState]:
    """Every query attends to every device's keys (and the initial state): ``(output, global state)``."""
    local = _local_state(call)
    ref = jnp.maximum(jax.lax.stop_gradient(jax.lax.pmax(local.log_reference, axis)), LOWEST)
    kv = jax.lax.psum(local.kv * jnp.exp(local.log_reference - ref)[..., None, None], axis)
    state = RecurrentState(kv, ref)
    if call.initial_state is not None:  # the same on every device: counted once
        state = _sum_states(
            jnp.stack([state.kv, call.initial_state.kv]),
            jnp.stack([state.log_reference, call.initial_state.log_reference])[..., None],
        )
    no_key = call.k[..., :0, :, :]
    out, _ = bidirectional(call.replace(k=no_key, v=call.v[..., :0, :, :], keep_keys=None, initial_state=state))
    return out, state


def _causal(call: Call, axis: str) -> tuple[Array, RecurrentState]:
    """Causal attention across the devices' blocks: ``(this block's output, the state after the sequence)``."""
    q, decay = call.q, call.log_decay  # decay: [batch..., L, heads, 1 or F]
    if decay is None:
        decay = jnp.zeros(q.shape[:-1] + (1,), computation_dtype(q))
    elif per_feature(decay, q):
        decay = jnp.broadcast_to(decay, q.shape[:-1] + decay.shape[-1:])
    else:
        decay = jnp.broadcast_to(decay, q.shape[:-1])[..., None]
    if call.keep_keys is not None:  # [batch..., heads or 1, L] -> [batch..., L, heads or 1, 1]
        decay = jnp.where(
            jnp.swapaxes(jnp.broadcast_to(call.keep_keys, q.shape[:-3] + call.keep_keys.shape[-2:]), -1, -2)[..., None],
            decay,
            0.0,
        )
    block_decay = jnp.sum(decay, axis=-3)  # Γ_p over this block's kept keys, [batch..., heads, 1 or F]
    local = _local_state(call)
    kvs, refs, totals = (jax.lax.all_gather(x, axis) for x in (local.kv, local.log_reference, block_decay))
    size, index = kvs.shape[0], jax.lax.axis_index(axis)
    blocks = jnp.arange(size)
    if call.initial_state is not None:  # the initial state enters as a block before the first, with no keys of its own
        kvs = jnp.concatenate([call.initial_state.kv[None], kvs])
        refs = jnp.concatenate([call.initial_state.log_reference[None], refs])
        totals = jnp.concatenate([jnp.zeros_like(totals[:1]), totals])
        blocks = jnp.concatenate([jnp.array([-1]), blocks])

    def decayed_to(end):
        """Each gathered state's log-scale at the start of block ``end``, ``[n, batch..., heads, 1 or F]``: decayed by
        the blocks in between (per feature with a per-feature decay)."""
        between = (blocks[:, None] < jnp.arange(size)[None, :]) & (jnp.arange(size)[None, :] < end)  # [q, r]
        decay = jnp.tensordot(between.astype(totals.dtype), totals[-size:], axes=(1, 0))  # Σ_{q<r<end} Γ_r
        return jnp.where((blocks < end).reshape((-1,) + (1,) * refs.ndim), refs[..., None] + decay, -jnp.inf)

    prefix = _sum_states(kvs, decayed_to(index))
    out, _ = causal(call.replace(initial_state=prefix))
    return out, _sum_states(kvs, decayed_to(size))


def sequence_parallel(call: Call) -> tuple[Array, RecurrentState]:
    """The sequence-parallel mode (inside ``shard_map`` over ``call.sequence_axis``): ``(this block's output, the
    sequence's state)``. Map parameters must be fixed, the mask key padding of this block."""
    axis = call.sequence_axis
    check_axis(axis)
    call = call.replace(stateful=True)
    return _causal(call, axis) if call.is_causal else _bidirectional(call, axis)
