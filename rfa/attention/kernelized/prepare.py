"""What every mode of kernelized attention shares: the checked call, and its inputs laid out for the modes.

:func:`check_call` checks a call once (shapes, map, mask, decay, state, parameter values) and returns a
:class:`Call`, the one argument of every mode (``mode(call) -> (output, state)``). :func:`rows` turns it
into the arrays a mode works on, in the computation dtype (float32, float64 for float64 inputs): q and k scaled
for the map's temperature, head-major with ``[batch..., heads]`` merged into one row axis, padded keys and queries
zeroed, the padded keys' log-mask, the decays, and the map's parameters (fitted from the call's tokens where that
is allowed).
:func:`output` turns a mode's numerator and normalizer back into the caller's layout and dtype.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from rfa._dtypes import check_compute_dtype, computation_dtype
from rfa._validation import InputError, check_broadcastable_to, check_floating
from rfa.attention.chunk_scores import later_sums
from rfa.attention.common import check_causal_lengths, check_qkv
from rfa.attention.common import renormalize as divide_by_normalizer
from rfa.attention.masks import MaskPlan, plan_mask
from rfa.attention.state import RecurrentState, check_state
from rfa.checks import raise_if
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class Call:
    """A checked call of kernelized attention: the argument of every mode.

    Arrays are the data of the pytree, the rest its static structure, so a mode jits as ``jax.jit(mode)``.

    Attributes:
      q, k, v: ``[batch..., length, heads, d]`` as given.
      projection: ``W [m, d_k]`` or None.
      keep_keys: ``[batch..., heads or 1, length]`` bools of the keys the mask keeps (its key padding), or None.
      keep_queries: ``[batch..., heads or 1, length]`` bools of the queries the mask keeps, or None.
      log_decay: log-decays (at least float32) broadcastable to ``[batch..., q_len, heads]`` (one per token), or
        of as many axes as q, ``[batch..., q_len, heads, F or 1]`` (one per feature), or None.
      initial_state: the state earlier keys left, or None.
      feature_params: the caller's map parameters, or None.
      relative_bias: ``[heads or 1, 2L − 1]`` biases per relative position (at least float32; the relative-bias
        mode), or None.
      fm: the estimator.
      is_causal: the caller's causal flag (the sequence-parallel mode reads it; the others are the mode).
      stateful: a state is read or returned: the map's parameters must be fixed, not fitted to the call.
      renormalize: as in :func:`rfa.kernelized_attention`.
      chunk_size: as in :func:`rfa.kernelized_attention`.
      precision: as in :func:`rfa.kernelized_attention`.
      compute_dtype: the operand dtype of the chunked and bidirectional forms' matmuls, or None (the computation
        dtype), as in :func:`rfa.kernelized_attention`.
      sequence_axis: the mesh axis splitting the sequence, or None.
    """

    q: Array
    k: Array
    v: Array
    projection: Array | None
    keep_keys: Array | None
    keep_queries: Array | None
    log_decay: Array | None
    initial_state: RecurrentState | None
    feature_params: dict | None
    relative_bias: Array | None
    fm: Estimator = dataclasses.field(metadata={"static": True})
    is_causal: bool = dataclasses.field(metadata={"static": True})
    stateful: bool = dataclasses.field(metadata={"static": True})
    renormalize: bool = dataclasses.field(metadata={"static": True})
    chunk_size: int = dataclasses.field(metadata={"static": True})
    precision: object = dataclasses.field(metadata={"static": True})
    compute_dtype: object = dataclasses.field(metadata={"static": True})
    sequence_axis: str | None = dataclasses.field(metadata={"static": True})

    def replace(self, **changes) -> Call:
        return dataclasses.replace(self, **changes)

    @property
    def contraction(self) -> dict:
        """The keywords of :func:`rfa.attention.chunk_scores.contract` for the modes' matmuls."""
        return {"precision": self.precision, "operands": self.compute_dtype}


jax.tree_util.register_dataclass(
    Call,
    data_fields=[f.name for f in dataclasses.fields(Call) if not f.metadata.get("static")],
    meta_fields=[f.name for f in dataclasses.fields(Call) if f.metadata.get("static")],
)


def per_feature(log_decay: Array, q: Array) -> bool:
    """Whether ``log_decay`` has one decay per feature: as many axes as q, ``[batch..., q_len, heads, F]``."""
    return jnp.ndim(log_decay) == jnp.ndim(q)


def check_log_decay(log_decay, q: Array, is_causal: bool) -> Array:
    """Checks ``log_decay`` (floating, <= 0, broadcastable to ``[batch..., q_len, heads]``, or to
    ``[batch..., q_len, heads, F]`` with as many axes as q); returns it at least float32."""
    if not is_causal:
        raise InputError(
            "log_decay needs is_causal=True: a decay weighs key j for query i by exp(G_i - G_j), which is "
            "defined for j <= i only. Use is_causal=True, or leave log_decay None."
        )
    log_decay = check_floating(log_decay, "log_decay")
    if per_feature(log_decay, q):
        target = q.shape[:-1] + log_decay.shape[-1:]
        check_broadcastable_to(log_decay.shape, target, "log_decay", "[batch..., q_len, heads, F] =")
    else:
        check_broadcastable_to(log_decay.shape, q.shape[:-1], "log_decay", "[batch..., q_len, heads] =")
    check_decay_sign(log_decay)
    return log_decay.astype(computation_dtype(log_decay))


def check_decay_features(log_decay: Array | None, num_outputs: int, fm: Estimator) -> None:
    """A per-feature decay (last axis of the laid-out ``[rows, L, ·]``) has 1 or F = ``num_outputs`` entries."""
    if log_decay is not None and log_decay.shape[-1] not in (1, num_outputs):
        raise InputError(
            f"log_decay has {log_decay.shape[-1]} decays per token and head (its last axis), but feature map "
            f"{fm.name!r} gives F = {num_outputs} features: a per-feature decay is [batch..., q_len, heads, F]."
        )


def check_decay_sign(log_decay: Array) -> None:
    """Raises a ValueError if ``log_decay`` has a positive entry (under ``jit`` when the compiled call runs)."""
    advice = "a gate in (0, 1) gives log_decay = log(gate), e.g. jax.nn.log_sigmoid(logits)."
    raise_if(
        log_decay > 0,
        lambda g: f"log_decay must be <= 0 (a decay factor exp(g) <= 1), got a maximum of {np.max(g)}; {advice}",
        values=(log_decay,),
    )


def check_relative_bias(relative_bias, q: Array, k: Array, *, log_decay, stateful: bool, sequence_axis) -> Array:
    """Checks ``relative_bias`` (floating, ``[heads or 1, 2L − 1]``, self-attention of one sequence, no state, decay
    or split sequence); returns it at least float32."""
    relative_bias = check_floating(relative_bias, "relative_bias")
    length, heads = q.shape[-3], q.shape[-2]
    if k.shape[-3] != length:
        raise InputError(
            f"relative_bias needs q_len == kv_len (self-attention over one sequence), got q_len={length} and "
            f"kv_len={k.shape[-3]}."
        )
    if relative_bias.ndim != 2 or relative_bias.shape[0] not in (1, heads) or relative_bias.shape[1] != 2 * length - 1:
        raise InputError(
            f"relative_bias must have shape [heads or 1, 2L - 1] = [{heads}, {2 * length - 1}] (entry L - 1 + i - j is "
            f"the bias of query i on key j), got {tuple(relative_bias.shape)}."
        )
    why = (
        "a recurrent state (initial_state, return_state: decoding)"
        if stateful
        else "log_decay"
        if log_decay is not None
        else "a sequence split over devices (sequence_axis)"
        if sequence_axis is not None
        else None
    )
    if why is not None:
        raise InputError(
            f"relative_bias cannot be combined with {why}: a bias of the distance i - j has no recurrent form "
            "(the sums over earlier keys change with every new query). Use rotary positions for decoding, or "
            "exact attention with a bias."
        )
    return relative_bias.astype(computation_dtype(relative_bias))


def check_call(
    q,
    k,
    v,
    *,
    estimator,
    projection,
    mask,
    is_causal,
    log_decay,
    feature_params,
    initial_state,
    return_state,
    renormalize,
    chunk_size,
    precision,
    sequence_axis,
    relative_bias=None,
    compute_dtype=None,
) -> tuple[Call, MaskPlan]:
    """The checks every mode's call makes, before tracing: the :class:`Call` and the mask's plan."""
    q, k, v = check_qkv(q, k, v)
    fm = lookup_estimator(estimator)
    if is_causal:
        check_causal_lengths(q, k)
    if log_decay is not None:
        log_decay = check_log_decay(log_decay, q, is_causal)
    if initial_state is not None:
        initial_state = check_state(initial_state, q.shape[:-3] + q.shape[-2:-1], v.shape[-1])
    stateful = initial_state is not None or bool(return_state)
    if relative_bias is not None:
        relative_bias = check_relative_bias(
            relative_bias, q, k, log_decay=log_decay, stateful=stateful, sequence_axis=sequence_axis
        )
    plan = plan_mask(mask, q, k, is_causal=is_causal)
    fm.check_params(feature_params or {})  # here, where concrete values can still be checked
    call = Call(
        q,
        k,
        v,
        projection,
        plan.keep_keys,
        plan.keep_queries,
        log_decay,
        initial_state,
        feature_params,
        relative_bias,
        fm=fm,
        is_causal=is_causal,
        stateful=stateful,
        renormalize=renormalize,
        chunk_size=chunk_size,
        precision=precision,
        compute_dtype=check_compute_dtype(compute_dtype, "kernelized_attention"),
        sequence_axis=sequence_axis,
    )
    return call, plan


def temperature(fm: Estimator, q: Array, k: Array) -> tuple[Array, Array]:
    """q and k in their computation dtype (:func:`rfa._dtypes.computation_dtype`), scaled by d^{-1/4} each for maps
    that estimate ``exp(qᵀk/√d)``."""
    dtype = computation_dtype(q, k)
    q, k = q.astype(dtype), k.astype(dtype)
    if fm.temperature_scaled:
        scale = q.shape[-1] ** -0.25
        q, k = q * scale, k * scale
    return q, k


def fixed_params_message(fm: Estimator, missing) -> str:
    """The error for a causal, stateful or sequence-parallel call whose map has ``missing`` parameters to fit."""
    return (
        f"feature map {fm.name!r} in causal mode, with a state or sequence-parallel needs "
        f"{', '.join(f'feature_params[{name!r}]' for name in missing)} fixed in advance: fitting "
        "them to the call's tokens would let future tokens change earlier outputs, or read a "
        "state built with other parameters. Fit them on calibration batches "
        "(rfa.attention.fit_feature_params, or rfa.layers.calibrating(model) for a model) or take "
        f"rfa.estimator({fm.name!r}).standard_params(d)."
    )


def resolve_feature_params(fm: Estimator, params, q, k, keep_q, keep_k, *, fixed: bool) -> dict:
    """Feature-map parameters, the ``fm.fitted`` ones fitted from q and k where none is given and ``fixed`` is False."""
    params = dict(params or {})
    missing = fm.to_fit(params)
    if missing:
        if fixed:
            raise InputError(fixed_params_message(fm, missing))
        fitted = fm.fit(q, k, keep_q, keep_k)
        params.update({name: fitted[name] for name in missing})
    return params


def merge_rows(x: Array, rows: tuple[int, ...], trailing: int) -> Array:
    """Broadcasts ``x`` to ``[*rows, *x.shape[-trailing:]]`` and merges the ``rows`` axes into one."""
    x = jnp.broadcast_to(x, rows + x.shape[x.ndim - trailing :])
    return x.reshape((math.prod(rows),) + x.shape[len(rows) :])


def _head_major(keep: Array, batch: tuple[int, ...]) -> Array:
    """``[batch'..., heads or 1, length]`` booleans → head-major ``[batch..., heads or 1, length, 1]``."""
    return jnp.broadcast_to(keep, batch + keep.shape[-2:])[..., None]


@dataclasses.dataclass(frozen=True)
class Rows:
    """A call's inputs in their computation dtype, row-major: ``[rows, length, ·]``, ``rows = prod([batch..., heads])``.

    Attributes:
      q, k, v: the temperature-scaled queries and keys and the values; padded ones are 0.
      key_log_mask: ``[rows, kv_len, 1]``, 0 for a kept key, -inf for a padded one (and, for a decayed call
        run bidirectionally, each key's decay to the end of the sequence added: ``[rows, kv_len, 1 or F]``).
      log_decay: ``[rows, q_len, 1 or F]`` (causal, decayed: one decay per token, or per feature) or None.
      params: the map's parameters, per-token ones laid out ``[rows, length, *event]``.
      shape: ``[batch..., heads]`` of the call.
    """

    q: Array
    k: Array
    v: Array
    key_log_mask: Array
    log_decay: Array | None
    params: dict
    shape: tuple[int, ...]


def rows(call: Call, *, causal: bool) -> Rows:
    """Lays out ``call`` for a mode (``causal``: the chunked causal form reads decays as they are)."""
    fm = call.fm
    # Head-major [batch..., heads, length, ·] inside (qh, kh, vh): every contraction is a plain batched matmul.
    qh, kh = (jnp.swapaxes(x, -3, -2) for x in temperature(fm, call.q, call.k))
    vh = jnp.swapaxes(call.v, -3, -2).astype(computation_dtype(call.v, qh))
    batch = call.q.shape[:-3]
    keep_k, keep_q = (None if x is None else _head_major(x, batch) for x in (call.keep_keys, call.keep_queries))
    if keep_q is not None:  # padded queries change no statistic or gradient; their outputs are set to 0
        qh = jnp.where(keep_q, qh, 0.0)
    if keep_k is None:
        key_log_mask = jnp.zeros(kh.shape[:-1] + (1,), kh.dtype)
    else:
        key_log_mask = jnp.where(keep_k, 0.0, -jnp.inf).astype(kh.dtype)
        kh, vh = jnp.where(keep_k, kh, 0.0), jnp.where(keep_k, vh, 0.0)  # padding may hold inf or NaN
    log_decay = call.log_decay
    if log_decay is not None:  # head-major [batch..., heads, L, 1 or F]
        if per_feature(log_decay, call.q):
            log_decay = jnp.moveaxis(jnp.broadcast_to(log_decay, call.k.shape[:-1] + log_decay.shape[-1:]), -2, -3)
        else:
            log_decay = jnp.swapaxes(jnp.broadcast_to(log_decay, call.k.shape[:-1]), -1, -2)[..., None]
        if keep_k is not None:  # a left-out key is skipped: no decay either
            log_decay = jnp.where(keep_k, log_decay, 0.0)
        if not causal:  # the keys' state at the end of the sequence: key j decayed by the decays after it
            key_log_mask = key_log_mask + later_sums(log_decay)
            log_decay = None
    params = resolve_feature_params(fm, call.feature_params, qh, kh, keep_q, keep_k, fixed=causal or call.stateful)
    # [batch..., heads] merged into one axis: with a size-1 axis among them (batch 1) XLA:CPU copies
    # F-wide arrays between layouts that differ only in where that axis goes.
    shape = qh.shape[:-2]
    qh, kh, vh, key_log_mask = (merge_rows(x, shape, 2) for x in (qh, kh, vh, key_log_mask))
    log_decay = None if log_decay is None else merge_rows(log_decay, shape, 2)
    params = {
        name: merge_rows(value, shape, 1 + fm.event_ndim(name))
        if name in fm.token_params and jnp.ndim(value) > fm.event_ndim(name)
        else value
        for name, value in params.items()
    }  # per-token parameters take the token layout; the others (arrays of the map: phases, R) stay as they are
    return Rows(qh, kh, vh, key_log_mask, log_decay, params, shape)


def initial_rows(state: RecurrentState, r: Rows, fm: Estimator, num_outputs: int) -> tuple:
    """The state row-major, ``(kv [rows, F, dv+1], R [rows, 1, 1])``, at least in the dtype of the rows ``r``."""
    if state.kv.shape[-2] != num_outputs:
        raise InputError(
            f"initial_state has F = {state.kv.shape[-2]} features but feature map {fm.name!r} gives "
            f"{num_outputs} with this projection; build the state with num_outputs={num_outputs}."
        )
    dtype = jnp.promote_types(state.kv.dtype, r.q.dtype)  # a float32 cache read by a float64 call: float64
    kv = state.kv.reshape((math.prod(r.shape),) + state.kv.shape[-2:])
    return kv.astype(dtype), state.log_reference.reshape(-1, 1, 1).astype(dtype)


def output(call: Call, num_aug: Array, log_reference: Array, s_q: Array, shape: tuple[int, ...]) -> Array:
    """The call's output ``[batch..., q_len, heads, d_v]`` in ``q.dtype`` from a mode's row-major sums.

    ``num_aug [rows, q_len, dv+1]`` holds ``φ̃(q)ᵀ[KV, z]``: the numerator and (last column) the normalizer;
    ``log_reference`` and ``s_q`` are ``[rows, q_len]``. Renormalized: ``D⁻¹ A V``; else ``A V`` with the
    stabilizers multiplied back. A padded query outputs 0.
    """
    num, den = num_aug[..., :-1], num_aug[..., -1]
    out = divide_by_normalizer(num, den) if call.renormalize else num * jnp.exp(s_q + log_reference)[..., None]
    out = jnp.swapaxes(out.reshape(shape + out.shape[-2:]), -3, -2).astype(call.q.dtype)
    if call.keep_queries is not None:
        out = jnp.where(jnp.swapaxes(call.keep_queries, -1, -2)[..., None], out, 0).astype(out.dtype)
    return out


def state(kv: Array, log_scale: Array, shape: tuple[int, ...]) -> RecurrentState:
    """The row-major state ``(kv [rows, F, dv+1], R [rows, 1, 1])`` as a :class:`RecurrentState` of the call."""
    return RecurrentState(kv.reshape(shape + kv.shape[-2:]), log_scale.reshape(shape))
