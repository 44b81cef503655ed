"""The public entries of kernelized attention: :func:`kernelized_attention`, which checks a call and runs its
mode, and :func:`sequence_parallel_attention`, which splits the sequence over a mesh axis for you."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from rfa._validation import InputError, check_floating, check_positive_int, renamed_keywords
from rfa.attention.common import as_bool_mask
from rfa.attention.kernelized.bidirectional import bidirectional
from rfa.attention.kernelized.causal import causal
from rfa.attention.kernelized.prepare import Call, check_call, check_decay_sign, fixed_params_message
from rfa.attention.kernelized.relative import relative
from rfa.attention.kernelized.sequence_parallel import check_key_padding, sequence_parallel
from rfa.attention.masks import CAUSAL, PADDING, UNSUPPORTED, MaskPlan, plan_mask, unsupported_message
from rfa.attention.segments import check_segment_ids, check_self_attention, sequence_starts, with_resets
from rfa.attention.state import RecurrentState
from rfa.checks import check_finite, raise_if
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def kernelized_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    estimator: str | Estimator,
    projection: Array | None,
    mask: Array | None = None,
    is_causal: bool = False,
    log_decay: Array | None = None,
    renormalize: bool = True,
    chunk_size: int = 64,
    feature_params: dict | None = None,
    precision=None,
    initial_state: RecurrentState | None = None,
    return_state: bool = False,
    sequence_axis: str | None = None,
    relative_bias: Array | None = None,
    segment_ids: Array | None = None,
    compute_dtype=None,
) -> Array | tuple[Array, RecurrentState]:
    """Random-feature attention ``D̂⁻¹ φ(Q)(φ(K)ᵀV)`` in O(L·m·d) time and memory, in every mode.

    For every map with ``temperature_scaled`` (all registered ones but elu) q and k are scaled by
    ``d^{-1/4}`` before the map, so that the softmax-kernel maps (trig, positive, hyperbolic, gerf,
    oprf) estimate ``exp(qᵀk/√d)``; the Gaussian maps then estimate ``exp(-|q-k|²/(2√d))`` and relu
    is Performer's generalized attention. Computation runs in float32 (float64 for float64 inputs), ``compute_dtype``
    aside, and the output has ``q.dtype``.

    Modes: bidirectional (``is_causal=False``; also cross-attention), chunked causal (``is_causal=True``), recurrent
    (a causal call on one token with ``initial_state`` and ``return_state=True``: O(F·d_v) per token at any
    position), prefill (``return_state=True``; the state of keys alone: pass a query of length 0) and reading a state
    (``initial_state`` with keys of length 0, e.g. cross-attention while decoding).

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``; kv_len may differ from q_len (cross-attention).
      v: ``[batch..., kv_len, heads, d_v]``.
      estimator: a registered name (``rfa.registered_estimators()``) or an ``Estimator``.
      projection: ``W [m, d_k]`` from ``rfa.sample_projection``, shared by all heads; None for deterministic maps.
      mask: an attention mask of any bool or numeric dtype (nonzero = attend) broadcastable to
        ``[batch..., heads, q_len, kv_len]``, as Flax builds them: key padding (``[..., 1, kv_len]``),
        query ⊗ key padding, or causal ∧ padding (then the chunked causal form runs). Padded queries
        output 0. Other patterns raise a ValueError, traced ones when the compiled call runs (see
        :mod:`rfa.attention.masks`); a float mask with negative entries (additive, 0/-inf) is refused.
      is_causal: each query attends to keys at or before its position (q_len == kv_len) and to the initial state.
      log_decay: per-token log-decays ``g <= 0`` broadcastable to ``[batch..., q_len, heads]``
        (causal only): ``S_t = exp(g_t) S_{t-1} + φ(k_t)[v_t, 1]ᵀ``. Gradients flow to it. A gate's
        input weight (``1 - gate`` in gated RFA) is the caller's: fold it into v (and the keys' weight).
      renormalize: divide by the estimated normalizer ``D̂`` (attention); if False return
        ``φ(Q)(φ(K)ᵀV)`` itself (for softmax-kernel maps, the estimate of ``exp(QKᵀ/√d) V``).
        The normalizer is only guarded against exactly 0; with trig or Gaussian features it can be
        near 0 or negative, and the output then blows up — the estimator's own behaviour.
      chunk_size: tokens per chunk of the causal form.
      feature_params: feature-map parameters, e.g. ``{"A": -0.1}`` for gerf; arrays broadcast against ``[batch...,
        heads, length]`` (e.g. one value per head: ``[heads, 1]``). For oprf, ``phi_sq`` is ``|q + k|²`` of the
        temperature-scaled inputs (``d^{-1/2}|q + k|²``). Parameters the map fits from data (``fm.fitted``, e.g.
        oprf's ``phi_sq``) default to ``fm.fit`` of q and k in bidirectional mode without a state, else required.
      precision: ``jax.lax.Precision`` of the contractions.
      initial_state: a :class:`~rfa.attention.RecurrentState` of earlier keys (``[batch..., heads, F,
        d_v + 1]``): every query also attends to them (causal: decayed by the log-decays up to it).
      return_state: also return the state after this call's keys (and the initial state).
      sequence_axis: inside ``jax.shard_map``, the mesh axis along which the sequence is split: q, k, v are this
        device's contiguous block (device order is sequence order), the output is this block's, and the state is
        the whole sequence's (:mod:`rfa.attention.sequence_parallel`). Masks must be key padding
        (``[..., 1, kv_len]``) of this block; map parameters must be fixed.
      relative_bias: ``b [heads or 1, 2L − 1]``, self-attention only (q_len == kv_len = L): query i weighs key j by
        ``exp(b[L − 1 + i − j]) φ(q_i)ᵀφ(k_j)`` (Luo et al., NeurIPS 2021), bidirectional or causal, computed by FFT
        in O(L log L) per feature and value column (:mod:`rfa.attention.kernelized.relative`, with its round-off).
        Gradients flow to it. Not with a state, ``log_decay`` or ``sequence_axis``.
      segment_ids: packed sequences (causal only, not with ``sequence_axis`` or ``relative_bias``): integers
        broadcastable to ``[batch..., L]``, one id per sequence packed in the row (Flax's convention). Each
        sequence is computed as if alone: the state starts fresh at a kept token whose id differs from the last
        kept token's (:mod:`rfa.attention.segments`); ``initial_state`` is the first sequence's.
      compute_dtype: the operand dtype of every mode's matmuls, summed in float32 (``jnp.bfloat16``: the maps, decays
        and state stay float32; docs/results/precision.md), or None (the computation's own dtype).

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype`` (a query with no attended key outputs 0);
      with ``return_state``, ``(output, state)``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 256, 64)
      >>> q = k = v = jnp.ones((2, 1024, 8, 64)) * 0.1
      >>> out, state = rfa.kernelized_attention(q, k, v, estimator="positive", projection=W, is_causal=True,
      ...                                       return_state=True)
      >>> token = q[:, :1]  # decoding: one more token continues from the prompt's state
      >>> out, state = rfa.kernelized_attention(token, token, token, estimator="positive", projection=W,
      ...                                       is_causal=True, initial_state=state, return_state=True)
      >>> out.shape, state.kv.shape
      ((2, 1, 8, 64), (2, 8, 256, 65))
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if sequence_axis is not None:
        check_key_padding(mask)
    call, plan = check_call(
        q,
        k,
        v,
        estimator=estimator,
        projection=projection,
        mask=mask,
        is_causal=is_causal,
        log_decay=log_decay,
        feature_params=feature_params,
        initial_state=initial_state,
        return_state=return_state,
        renormalize=renormalize,
        chunk_size=chunk_size,
        precision=precision,
        sequence_axis=sequence_axis,
        relative_bias=relative_bias,
        compute_dtype=compute_dtype,
    )
    if segment_ids is not None:
        call = _with_sequence_starts(call, segment_ids)
    keys = call.keep_keys
    check_finite(q=call.q, k=call.k, v=call.v, keep={"q": call.keep_queries, "k": keys, "v": keys})
    out, state = _dispatch(call, plan)
    return (out, state) if return_state else out


kernelized_attention = renamed_keywords(feature_map="estimator")(kernelized_attention)  # its keyword before rfa 0.3


def _with_sequence_starts(call: Call, segment_ids) -> Call:
    """``call`` with its packed sequences' starts folded into its log-decays (:mod:`rfa.attention.segments`)."""
    where = "kernelized_attention"
    if not call.is_causal or call.sequence_axis is not None or call.relative_bias is not None:
        raise InputError(
            f"{where}: segment_ids need is_causal=True without sequence_axis or relative_bias (a packed row's "
            "sequences restart the causal state; the other modes have none to restart)."
        )
    check_self_attention(call.q, call.k, where)
    batch, length = call.q.shape[:-3], call.q.shape[-3]
    segment_ids = check_segment_ids(segment_ids, batch + (length,))[..., None, :]  # [batch..., 1, L]
    keep = None if call.keep_keys is None else jnp.broadcast_to(call.keep_keys, batch + call.keep_keys.shape[-2:])
    starts = jnp.swapaxes(sequence_starts(segment_ids, keep), -1, -2)  # [batch..., L, heads or 1]
    return call.replace(log_decay=with_resets(call.log_decay, starts))


def _dispatch(call: Call, plan: MaskPlan) -> tuple[Array, RecurrentState]:
    """Runs the mode of the call: sequence-parallel, or the one its mask's pattern selects (at run time if traced)."""
    if call.sequence_axis is not None:
        return sequence_parallel(call)
    modes = MODES if call.relative_bias is None else RELATIVE_MODES
    if isinstance(plan.pattern, int):
        return modes[plan.pattern](call)
    # A traced mask: its pattern is known at run time only (see rfa.attention.masks). `runnable` says
    # which of the patterns PADDING, CAUSAL, UNSUPPORTED this call can run.
    can_fit = not call.fm.to_fit(call.feature_params)
    same_length = call.q.shape[-3] == call.k.shape[-3]
    runnable = (not call.is_causal and call.log_decay is None, same_length and can_fit, False)
    shape, found = plan.found

    def message(pattern, found) -> str:  # what the same call with this mask concrete raises
        if int(pattern) == UNSUPPORTED:
            return unsupported_message(shape, found)
        return fixed_params_message(call.fm, call.fm.to_fit(call.feature_params))

    raise_if(~jnp.asarray(runnable)[plan.pattern], message, values=(plan.pattern, found))
    if not any(runnable):  # causal with parameters to fit: the causal form raises the error that says so
        return modes[CAUSAL](call)
    shapes = jax.eval_shape(modes[runnable.index(True)], call)

    def unsupported(call):
        return jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)

    branches = [modes[p] if ok else unsupported for p, ok in enumerate(runnable)]
    return jax.lax.switch(plan.pattern, branches, call)


MODES = {PADDING: bidirectional, CAUSAL: causal}  # the mode of each pattern of rfa.attention.masks
RELATIVE_MODES = {PADDING: functools.partial(relative, causal=False), CAUSAL: functools.partial(relative, causal=True)}


def attention_over(sequence_axis: str | None):
    """:func:`sequence_parallel_attention` along ``sequence_axis`` if the mesh set by ``jax.set_mesh`` splits
    it (size > 1), else :func:`kernelized_attention`: what a layer configured with a sequence axis calls."""
    mesh = jax.sharding.get_abstract_mesh()
    if sequence_axis is not None and sequence_axis in mesh.axis_names and mesh.shape[sequence_axis] > 1:
        return functools.partial(sequence_parallel_attention, axis=sequence_axis)
    return kernelized_attention


def _dense_mask_sequence_parallel(q, k, v, *, mask, return_state: bool, **arguments):
    """:func:`sequence_parallel_attention` with a dense mask of Flax's (query ⊗ key padding, causal ∧ padding),
    reduced on the global arrays to the key padding, the causal flag its pattern selects (at run time under
    ``jit``, by ``lax.switch``; any other pattern raises as in :func:`kernelized_attention`) and the queries kept
    (a padded query outputs 0, its input zeroed first)."""
    plan = plan_mask(mask, q, k, is_causal=arguments.pop("is_causal", False))
    keep_q = None
    if plan.keep_queries is not None:  # [batch..., heads or 1, L] -> [batch..., L, heads or 1, 1]
        keep_q = jnp.swapaxes(plan.keep_queries, -1, -2)[..., None]
        q = jnp.where(keep_q, q, 0)

    def attend(causal: bool):
        return sequence_parallel_attention(
            q, k, v, mask=plan.keep_keys[..., None, :], is_causal=causal, return_state=True, **arguments
        )

    if isinstance(plan.pattern, int):
        out, state = attend(plan.pattern == CAUSAL)
    else:
        shape, found = plan.found
        raise_if(plan.pattern == UNSUPPORTED, lambda found: unsupported_message(shape, found), values=(found,))
        out, state = jax.lax.switch(jnp.minimum(plan.pattern, CAUSAL), [lambda: attend(False), lambda: attend(True)])
    if keep_q is not None:
        out = jnp.where(keep_q, out, 0).astype(out.dtype)
    return (out, state) if return_state else out


def _token_spec(fm, name: str, value, axis: str):
    """The spec of a map parameter: split along the length if it is per token (``fm.token_params``), else replicated."""
    spec = jax.sharding.PartitionSpec
    if name in fm.token_params:
        event, ndim = fm.event_ndim(name), jnp.ndim(value)
        if ndim > event and jnp.shape(value)[-1 - event] != 1:
            return spec(*([None] * (ndim - 1 - event)), axis)
    return spec()


def sequence_parallel_attention(
    q,
    k,
    v,
    *,
    axis: str,
    mesh: jax.sharding.Mesh | None = None,
    mask=None,
    log_decay=None,
    projection=None,
    feature_params: dict | None = None,
    initial_state: RecurrentState | None = None,
    return_state: bool = False,
    **options,
):
    """``rfa.kernelized_attention`` with the sequence split over the mesh axis ``axis`` (it shards for you).

    Only ``axis`` is manual inside: the other axes of the mesh (data, model) keep the shardings XLA gives
    the arrays, so this runs inside a jitted, GSPMD-sharded training step as well as on its own.

    Args:
      q, k, v: ``[batch..., L, heads, d]`` global arrays; L must be divisible by the axis size (pad the
        sequence and mask the padding otherwise).
      axis: the mesh axis the sequence is split along; device order along it is sequence order.
      mesh: a ``jax.sharding.Mesh`` with the axis ``axis``; None takes the mesh set by ``jax.set_mesh``.
      mask: None, key padding broadcastable to ``[batch..., heads, 1, L]``, or a dense mask of Flax's
        (``[batch..., heads, L, L]``: query ⊗ key padding or causal ∧ padding, which sets the causal form; other
        patterns raise, as in ``rfa.kernelized_attention``).
      log_decay: ``[batch..., L, heads]`` (causal).
      projection, feature_params: as in ``rfa.kernelized_attention``; a per-token parameter (the map's
        ``token_params`` with a length axis, e.g. rfa's ``key_log_weight [batch..., heads, L]``) is split
        along L like the tokens, every other one is replicated.
      initial_state, return_state: as in ``rfa.kernelized_attention`` (the state is replicated).
      **options: the other keywords of ``rfa.kernelized_attention`` (``estimator``, ``is_causal``, ...).

    Returns:
      ``[batch..., L, heads, d_v]`` (sharded along L), or ``(output, state)``.

    Example:
      >>> mesh = jax.make_mesh((len(jax.devices()),), ("seq",))
      >>> W = rfa.sample_projection(jax.random.key(0), 32, 16)
      >>> x = jnp.ones((2, 8 * len(jax.devices()), 4, 16)) * 0.1
      >>> rfa.attention.sequence_parallel_attention(x, x, x, mesh=mesh, axis="seq", estimator="positive",
      ...                                           projection=W, is_causal=True).shape[1] == x.shape[1]
      True
    """
    given_mesh = mesh is not None
    mesh = mesh if given_mesh else jax.sharding.get_abstract_mesh()
    if axis not in mesh.axis_names:
        where = "the mesh passed as mesh=" if given_mesh else "the mesh set by jax.set_mesh"
        where = where if mesh.axis_names else "no mesh (pass mesh= or call inside jax.set_mesh)"
        raise InputError(f"mesh has no axis {axis!r}; its axes are {tuple(mesh.axis_names)} ({where}).")
    if mask is not None and jnp.ndim(mask) >= 2 and jnp.shape(mask)[-2] != 1:  # Flax's dense masks
        return _dense_mask_sequence_parallel(
            q,
            k,
            v,
            axis=axis,
            mesh=mesh if given_mesh else None,
            mask=mask,
            log_decay=log_decay,
            projection=projection,
            feature_params=feature_params,
            initial_state=initial_state,
            return_state=return_state,
            **options,
        )
    check_key_padding(mask)
    if mask is not None:  # the values' checks, on the global arrays: none can run inside shard_map (rfa.checks)
        mask = as_bool_mask(mask)
    if log_decay is not None:
        check_decay_sign(check_floating(log_decay, "log_decay"))
    size, length = mesh.shape[axis], q.shape[-3]
    if length % size or k.shape[-3] % size:
        raise InputError(
            f"the sequence lengths (q_len={length}, kv_len={k.shape[-3]}) must be divisible by the size of mesh axis "
            f"{axis!r} ({size}): pad the sequences to a multiple of {size} and mask the padding (mask=key padding)."
        )
    fm = lookup_estimator(options["estimator"]) if "estimator" in options else None
    spec = jax.sharding.PartitionSpec
    tokens = spec(*([None] * (q.ndim - 3)), axis)  # [batch..., L, ...] split along L
    feature_params = dict(feature_params or {})
    numbers = {name: value for name, value in feature_params.items() if isinstance(value, int | float)}  # static
    arrays = {name: value for name, value in feature_params.items() if name not in numbers}
    args = {
        "q": q,
        "k": k,
        "v": v,
        "mask": mask,
        "log_decay": log_decay,
        "initial_state": initial_state,
        "projection": projection,
        "feature_params": arrays or None,
    }
    specs = {
        "q": tokens,
        "k": tokens,
        "v": tokens,
        "log_decay": tokens,
        "mask": None if mask is None else spec(*([None] * (jnp.ndim(mask) - 1)), axis),
        "initial_state": spec(),
        "projection": spec(),
        "feature_params": {name: _token_spec(fm, name, value, axis) for name, value in arrays.items()},
    }
    given = {name: value for name, value in args.items() if value is not None}
    in_specs = {name: specs[name] for name in given}
    # Arrays committed elsewhere (or nowhere) are laid out on the mesh first: on the given one, or on the mesh
    # set by jax.set_mesh when its axis is Explicit (shard_map then checks the inputs' shardings; with Auto axes,
    # as in rfa's training mesh, XLA lays them out itself).
    explicit = mesh.axis_types[mesh.axis_names.index(axis)] == jax.sharding.AxisType.Explicit
    if given_mesh or explicit:
        given = jax.tree.map(
            lambda s, value: jax.tree.map(
                lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s) if given_mesh else s), value
            ),
            in_specs,
            given,
            is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec),
        )

    def local(given):
        return kernelized_attention(
            given["q"],
            given["k"],
            given["v"],
            mask=given.get("mask"),
            log_decay=given.get("log_decay"),
            projection=given.get("projection"),
            feature_params={**numbers, **given.get("feature_params", {})},
            initial_state=given.get("initial_state"),
            return_state=True,
            sequence_axis=axis,
            **options,
        )

    # The state is the same on every device by construction (sums of gathered states), which shard_map's
    # replication check cannot infer through axis_index; the tests compare it with one device's.
    out, state = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(in_specs,),
        out_specs=(tokens, spec()),
        axis_names={axis},
        check_vma=False,
    )(given)
    return (out, state) if return_state else out


sequence_parallel_attention = renamed_keywords(feature_map="estimator")(
    sequence_parallel_attention
)  # its keyword before rfa 0.3
