"""Packed sequences: several sequences in one row, told apart by Flax's ``segment_ids [batch..., L]``.

Training and prefill pack short sequences into one row; each must then be computed as if it were alone. For the
attention of a quadratic kind that is a mask, ``segment_ids[i] == segment_ids[j]`` (Flax's
``make_attention_mask(segment_ids, segment_ids, jnp.equal)``). For a kind with a state (kernelized causal
attention, gated or not, and the delta rule) it is a state that starts fresh where a new sequence starts:
``S_t = 0 · S_{t−1} + (token t's write)``, a decay factor of 0 at that token. rfa writes it as a log-decay of
:data:`RESET_LOG_DECAY` there, so every chunked form, its secondary chunking and its sequence-parallel split run
unchanged: each form takes ``exp`` of sums of log-decays, and any sum that crosses a start is ≤ −10⁶, whose
``exp`` is exactly 0 in float32 and float64, in values and in gradients. A decay sum that crosses no start never
includes it, since the forms sum decays term by term (:mod:`rfa.attention.chunk_scores`).

A token starts a sequence when it is kept (not padding) and its id differs from that of the last kept token before
it. The first kept token continues the state given to the call (``initial_state``): a state belongs to the
sequence whose tokens follow it. Padding changes nothing, wherever it sits, whatever its id.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._validation import InputError, InputTypeError, check_broadcastable_to

Array = jax.Array

RESET_LOG_DECAY = -1e6  # the log-decay at a sequence's first token: exp of any sum that holds it is exactly 0


def check_segment_ids(segment_ids, tokens: tuple[int, ...]) -> Array:
    """Checks ``segment_ids`` (integers or bools, broadcastable to ``tokens = [batch..., L]``); returns them
    broadcast to ``tokens``."""
    segment_ids = jnp.asarray(segment_ids)
    if not (jnp.issubdtype(segment_ids.dtype, jnp.integer) or segment_ids.dtype == jnp.bool_):
        raise InputTypeError(
            f"segment_ids must hold integers (one id per packed sequence, Flax's convention), got dtype "
            f"{segment_ids.dtype}."
        )
    check_broadcastable_to(segment_ids.shape, tokens, "segment_ids", "[batch..., L] =")
    return jnp.broadcast_to(segment_ids, tokens)


def sequence_starts(segment_ids: Array, keep: Array | None = None) -> Array:
    """``[..., L]`` bools: True at a kept token whose id differs from the last kept token's before it.

    Args:
      segment_ids: ``[..., L]`` integers.
      keep: ``[..., L]`` bools (False: padding) broadcastable against ``segment_ids``, or None (every token kept).

    Example:
      >>> ids = jnp.array([1, 1, 2, 2, 0, 2, 3])
      >>> keep = jnp.array([True, True, True, True, False, True, True])
      >>> sequence_starts(ids, keep).astype(int).tolist()  # the padding between two tokens of sequence 2 splits nothing
      [0, 0, 1, 0, 0, 0, 1]
    """
    length = segment_ids.shape[-1]
    if keep is None:
        return jnp.concatenate(
            [jnp.zeros_like(segment_ids[..., :1], jnp.bool_), segment_ids[..., 1:] != segment_ids[..., :-1]], -1
        )
    segment_ids, keep = jnp.broadcast_arrays(segment_ids, keep)
    position = jnp.where(keep, jnp.arange(length), -1)
    last_kept = jax.lax.cummax(position, axis=position.ndim - 1)  # the last kept token at or before t
    before = jnp.concatenate([jnp.full_like(last_kept[..., :1], -1), last_kept[..., :-1]], axis=-1)
    previous = jnp.take_along_axis(segment_ids, jnp.maximum(before, 0), axis=-1)
    return keep & (before >= 0) & (segment_ids != previous)


def sequence_index(segment_ids: Array, keep: Array | None = None) -> Array:
    """``[..., L]``: the number of sequence starts up to each token (:func:`sequence_starts`), the ids made
    canonical: a padding token takes the index of the sequence before it, so that ids that differ from a
    predecessor's mark exactly the starts. Pass these to a primitive that knows no padding (the delta rule)."""
    return jnp.cumsum(sequence_starts(segment_ids, keep), axis=-1, dtype=jnp.int32)


def sequence_positions(segment_ids: Array) -> Array:
    """``[..., L]`` int32: each token's position within its packed sequence, 0 where the id changes (a model's
    positions over a packed row, so that absolute positions too see each sequence as if it were alone).

    Example:
      >>> sequence_positions(jnp.array([1, 1, 1, 2, 2, 0])).tolist()
      [0, 1, 2, 0, 1, 0]
    """
    index = jnp.arange(segment_ids.shape[-1], dtype=jnp.int32)
    start = jnp.where(sequence_starts(segment_ids), index, 0)
    return index - jax.lax.cummax(start, axis=start.ndim - 1)


def same_sequence(segment_ids: Array) -> Array:
    """``[..., 1, L, L]`` bools: query i and key j are in the same sequence (the mask of a quadratic kind)."""
    return (segment_ids[..., :, None] == segment_ids[..., None, :])[..., None, :, :]


def with_resets(log_decay: Array | None, starts: Array) -> Array:
    """``log_decay [batch..., L, heads(, F)]`` (None: no decay) with :data:`RESET_LOG_DECAY` at the starts
    (``starts [batch..., L, heads or 1]``), in float32 (float64 for float64 decays)."""
    if log_decay is None:
        return jnp.where(starts, RESET_LOG_DECAY, 0.0).astype(jnp.float32)
    if log_decay.ndim == starts.ndim + 1:  # one decay per feature or key channel
        starts = starts[..., None]
    return jnp.where(starts, jnp.asarray(RESET_LOG_DECAY, log_decay.dtype), log_decay)


def check_self_attention(q: Array, k: Array, where: str) -> None:
    """Packed sequences need self-attention: ``q_len == kv_len``."""
    if q.shape[-3] != k.shape[-3]:
        raise InputError(
            f"{where}: segment_ids need self-attention over one packed row (q_len == kv_len), got q_len="
            f"{q.shape[-3]} and kv_len={k.shape[-3]}."
        )
