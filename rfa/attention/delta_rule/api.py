"""The public entry of the delta rule: :func:`delta_rule_attention` checks a call and runs its form."""

from __future__ import annotations

import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from rfa._dtypes import check_compute_dtype
from rfa._validation import InputError, check_broadcastable_to, check_floating, check_positive_int
from rfa.attention.common import check_causal_lengths, check_qkv
from rfa.attention.delta_rule.chunked import chunked
from rfa.attention.delta_rule.recurrent import recurrent
from rfa.attention.kernelized.prepare import check_decay_sign
from rfa.attention.kernelized.sequence_parallel import check_axis
from rfa.attention.segments import check_segment_ids, sequence_starts, with_resets
from rfa.checks import check_finite, raise_if

Array = jax.Array

BETA_RANGE = (
    "beta must lie in [0, 2] (the eigenvalues of I − β k kᵀ are then in [−1, 1] for ‖k‖ ≤ 1, so the state cannot "
    "grow); a sigmoid gives [0, 1], 2 · sigmoid gives [0, 2]"
)


def check_delta_rule_call(q, k, v, beta, log_decay, initial_state):
    """Checks a call's arrays; returns them as arrays, ``beta`` broadcast to ``[batch..., L, heads]``, ``log_decay``
    to ``[batch..., L, heads]`` or, with as many axes as q (one decay per key channel), ``[batch..., L, heads, d_k]``,
    and the state (zeros when None) ``[batch..., heads, d_k, d_v]`` in float32 at least (a bfloat16 state given
    is promoted: rounding the state every token loses the small writes and the decays near 1)."""
    q, k, v = check_qkv(q, k, v)
    check_causal_lengths(q, k)
    tokens = q.shape[:-1]  # [batch..., L, heads]
    if isinstance(beta, numbers.Real) and not isinstance(beta, bool):  # one strength for every token and head
        beta = jnp.asarray(beta, jnp.promote_types(q.dtype, jnp.float32))
    beta = check_floating(beta, "beta")
    check_broadcastable_to(beta.shape, tokens, "beta", "[batch..., L, heads] =")
    raise_if(
        (beta < 0) | (beta > 2),
        lambda b: f"{BETA_RANGE}; got values from {np.min(b)} to {np.max(b)}.",
        values=(beta,),
    )
    beta = jnp.broadcast_to(beta, tokens)
    if log_decay is not None:
        log_decay = check_floating(log_decay, "log_decay")
        if log_decay.ndim == q.ndim:  # one decay per key channel (KDA)
            target, expected = q.shape, "[batch..., L, heads, d_k] ="
        else:
            target, expected = tokens, "[batch..., L, heads] ="
        check_broadcastable_to(log_decay.shape, target, "log_decay", expected)
        check_decay_sign(log_decay)
        log_decay = jnp.broadcast_to(log_decay, target)
    state_shape = q.shape[:-3] + (q.shape[-2], q.shape[-1], v.shape[-1])
    dtype = jnp.promote_types(q.dtype, jnp.float32)  # the state is float32 at least, whatever it is given in
    if initial_state is None:
        return q, k, v, beta, log_decay, jnp.zeros(state_shape, dtype)
    state = check_floating(initial_state, "initial_state")
    if state.shape != state_shape:
        raise InputError(
            f"initial_state must have shape [batch..., heads, d_k, d_v] = {state_shape} for these q, k, v, got "
            f"{tuple(state.shape)}."
        )
    return q, k, v, beta, log_decay, state.astype(jnp.promote_types(dtype, state.dtype))


def delta_rule_attention(
    q: Array,
    k: Array,
    v: Array,
    beta: Array,
    *,
    log_decay: Array | None = None,
    initial_state: Array | None = None,
    return_state: bool = False,
    chunk_size: int = 64,
    sequence_axis: str | None = None,
    segment_ids: Array | None = None,
    compute_dtype=None,
) -> Array | tuple[Array, Array]:
    """Causal attention by the (gated) delta rule: a state that overwrites the value of a key instead of adding.

    ``S_t = (I − β_t k_t k_tᵀ) D_t S_{t−1} + β_t k_t v_tᵀ`` and ``o_t = S_tᵀ q_t``: the state decays, then token t
    writes ``β_t`` of the error between its value and what the decayed state reads for its key, and its query reads
    the state after its own write. No normalizer (DeltaNet; Schlag, Irie, Schmidhuber, ICML 2021; Yang, Wang,
    Zhang, Shen, Kim, NeurIPS 2024). With ``log_decay`` one per token, ``D_t = exp(g_t) I``, it is the gated delta
    rule (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025); with one per key channel,
    ``D_t = Diag(exp(g_t))``, Kimi Delta Attention (KDA; Kimi Team, "Kimi Linear", arXiv 2510.26692, 2025);
    without, DeltaNet. q and k are used as given: no scaling, no
    normalization. Stability needs ``‖k_t‖ ≤ 1``: the papers' map (SiLU, L2 normalization, q scaled by
    ``1/√d_k``) is the model kinds' (:mod:`rfa.models`); with ``β ≤ 2`` the transition's eigenvalues stay in
    [−1, 1] (Grazzi et al., ICLR 2025, allow β in (1, 2] for negative eigenvalues). Computation runs in float32
    (float64 for float64 inputs) and the output has ``q.dtype``; ``compute_dtype=jnp.bfloat16`` runs the chunked
    form's matmuls on bfloat16 operands, summed in float32, with the state, the decays and their sums, and the
    triangular solve in float32 (docs/howto/precision.md).

    Forms (:mod:`rfa.attention.delta_rule`): chunked (``chunk_size > 1``: per chunk a unit lower-triangular solve,
    across chunks a scan carrying S; autodiff runs through it) and recurrent (``chunk_size=1``, and any call on
    one token: O(d_k·d_v) per token, for decoding). A token with ``β_t = 0`` and ``g_t = 0`` leaves the state as
    it is: that is how to skip padding.

    Args:
      q: ``[batch..., L, heads, d_k]``.
      k: ``[batch..., L, heads, d_k]``.
      v: ``[batch..., L, heads, d_v]``.
      beta: writing strengths in [0, 2], broadcastable to ``[batch..., L, heads]``, or one Python number for every
        token. Gradients flow to it.
      log_decay: log-decays ``g ≤ 0`` broadcastable to ``[batch..., L, heads]`` (one per token), or of as many axes
        as q and broadcastable to ``[batch..., L, heads, d_k]`` (one per key channel, KDA), or None (no decay).
        Gradients flow to it.
      initial_state: ``[batch..., heads, d_k, d_v]``, the state of earlier tokens (zeros when None).
      return_state: also return the state after the L tokens.
      chunk_size: tokens per chunk; 1 runs the recurrent form.
      sequence_axis: inside ``jax.shard_map``, the mesh axis along which the sequence is split (device order is
        sequence order): q, k, v, beta, log_decay are this device's contiguous block and the output is this
        block's. A block maps the state entering it affinely, ``S ↦ A S + B`` (``A`` is ``d_k × d_k``); each
        device forms its ``(A, B)``, they are all-gathered and composed in order, and each device then runs its
        block from the state the blocks before it leave. The returned state is the sequence's, on every device.
      segment_ids: packed sequences: integers broadcastable to ``[batch..., L]``, one id per sequence packed in the
        row (Flax's convention). The state starts fresh at each token whose id differs from the token's before it
        (a decay factor of 0 there; :mod:`rfa.attention.segments`), so each sequence is computed as if alone;
        ``initial_state`` is the first sequence's. Padding inside a packed row (β = 0, g = 0) should carry the id
        of the sequence before it, or it would start one (``rfa.attention.segments.sequence_index`` makes such
        ids from any ids and a padding mask). Not with ``sequence_axis``.
      compute_dtype: the operand dtype of the chunked form's matmuls (the scores, and the state's reads and
        writes), or None (the computation's own dtype). The recurrent form (decoding) ignores it.

    Returns:
      ``[batch..., L, heads, d_v]`` in ``q.dtype``; with ``return_state``, ``(output, state)``, the state
      ``[batch..., heads, d_k, d_v]`` in float32 (float64 for float64 inputs or state), a bfloat16
      ``initial_state`` included.

    Example:
      >>> keys = jax.random.split(jax.random.key(0), 3)
      >>> q, k = (jax.random.normal(key, (2, 100, 4, 16)) for key in keys[:2])
      >>> q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))  # ‖k‖ = 1
      >>> v = jax.random.normal(keys[2], (2, 100, 4, 32))
      >>> beta = jnp.full((2, 100, 4), 0.5)
      >>> out, state = rfa.attention.delta_rule_attention(q, k, v, beta, return_state=True)
      >>> token = rfa.attention.delta_rule_attention(q[:, -1:], k[:, -1:], v[:, -1:], beta[:, -1:],
      ...                                            initial_state=state)  # one more token: O(1) decoding
      >>> out.shape, state.shape, token.shape
      ((2, 100, 4, 32), (2, 4, 16, 32), (2, 1, 4, 32))
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    q, k, v, beta, log_decay, state = check_delta_rule_call(q, k, v, beta, log_decay, initial_state)
    if segment_ids is not None:
        if sequence_axis is not None:
            raise InputError("delta_rule_attention: segment_ids are not supported with sequence_axis.")
        segment_ids = check_segment_ids(segment_ids, q.shape[:-2])
        log_decay = with_resets(log_decay, sequence_starts(segment_ids)[..., None])
    check_finite(q=q, k=k, v=v)
    compute_dtype = check_compute_dtype(compute_dtype, "delta_rule_attention")
    out, state = _run(
        q, k, v, beta, log_decay, state, chunk_size=chunk_size, sequence_axis=sequence_axis, operands=compute_dtype
    )
    return (out, state) if return_state else out


@functools.partial(jax.jit, static_argnames=("chunk_size", "sequence_axis", "operands"))
def _run(q, k, v, beta, log_decay, state, *, chunk_size: int, sequence_axis: str | None, operands=None):
    """Lays the tokens out as rows ``[batch·heads, L, ·]``, runs the form, and lays the output back."""
    dtype = state.dtype
    batch_shape, (length, heads) = q.shape[:-3], q.shape[-3:-1]

    def rows(x):  # [batch..., L, heads, ·] -> [rows, L, ·]
        return jnp.swapaxes(x, -2, -3).reshape((-1, length) + x.shape[-1:]).astype(dtype)

    def token_rows(x):  # [batch..., L, heads] -> [rows, L]
        return rows(x[..., None])[..., 0]

    form = (
        recurrent if chunk_size == 1 or length == 1 else functools.partial(chunked, chunk=chunk_size, operands=operands)
    )
    if log_decay is not None:  # [rows, L] or, one per key channel, [rows, L, d_k]
        log_decay = rows(log_decay) if log_decay.ndim == q.ndim else token_rows(log_decay)
    args = (rows(q), rows(k), rows(v), token_rows(beta), log_decay)
    start = state.astype(dtype).reshape((-1,) + state.shape[-2:])
    if sequence_axis is None:
        out, end = form(*args, start)
    else:
        out, end = _sequence_parallel(form, args, start, sequence_axis)
    out = jnp.swapaxes(out.reshape(batch_shape + (heads, length, v.shape[-1])), -2, -3)
    return out.astype(q.dtype), end.reshape(state.shape)


def varying(x: Array, axis: str) -> Array:
    """``x`` typed as varying over the mesh axis ``axis`` (a no-op where it is, or where JAX tracks no such types)."""
    if axis in jax.typeof(x).manual_axis_type.varying:
        return x
    return jax.lax.pcast(x, axis, to="varying")


def invariant(x: Array, axis: str) -> Array:
    """``x``, the same on every device of the mesh axis ``axis``, typed so for ``shard_map``'s ``out_specs=P()``:
    device 0's, summed with zeros (exact)."""
    return jax.lax.psum(jnp.where(jax.lax.axis_index(axis) == 0, x, jnp.zeros_like(x)), axis)


def _sequence_parallel(form, args, start: Array, axis: str) -> tuple[Array, Array]:
    """This block's output and the sequence's final state, the sequence split over the mesh axis ``axis``.

    The block's map of the state is affine and acts on each column of S alike, so one pass over the block from
    ``[0 | I]`` with values ``[V | 0]`` yields ``[B | A]``."""
    check_axis(axis)
    q, k, v, beta, log_decay = args
    start = varying(start, axis)  # the scans' carries vary over the blocks, as shard_map's check_vma types them
    num_rows, d_k, d_v = start.shape
    identity = jnp.broadcast_to(jnp.eye(d_k, dtype=start.dtype), (num_rows, d_k, d_k))
    values = jnp.concatenate([v, jnp.zeros(v.shape[:-1] + (d_k,), v.dtype)], axis=-1)
    _, affine = form(q, k, values, beta, log_decay, jnp.concatenate([jnp.zeros_like(start), identity], axis=-1))
    offsets, transitions = (jax.lax.all_gather(x, axis) for x in (affine[..., :d_v], affine[..., d_v:]))

    def enter(s, block):  # the state entering each block, then the sequence's
        transition, offset = block
        return transition @ s + offset, s

    end, entering = jax.lax.scan(enter, start, (transitions, offsets))
    index = jax.lax.axis_index(axis)
    out, _ = form(q, k, v, beta, log_decay, jnp.take(entering, index, axis=0))
    return out, invariant(end, axis)
