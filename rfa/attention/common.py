"""Shape checks and pieces shared by exact and kernelized attention.

Layout (Flax): ``q [batch..., q_len, heads, d_k]``, ``k [batch..., kv_len, heads, d_k]``,
``v [batch..., kv_len, heads, d_v]``; ``mask`` broadcastable to
``[batch..., heads, q_len, kv_len]`` with True = attend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, InputTypeError, check_broadcastable_to, check_floating, check_rank
from rfa.checks import raise_if

Array = jax.Array


def check_qkv(q, k, v) -> tuple[Array, Array, Array]:
    """Checks the attention inputs' dtypes, ranks and agreeing dimensions."""
    q, k, v = (check_floating(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    for a, name, last in ((q, "q", "d_k"), (k, "k", "d_k"), (v, "v", "d_v")):
        length = "q_len" if name == "q" else "kv_len"
        check_rank(a, name, min_ndim=3, layout=f"[batch..., {length}, heads, {last}]")
    if k.shape[:-1] != v.shape[:-1]:
        raise InputError(
            "k and v must agree on [batch..., kv_len, heads], got "
            f"k.shape={tuple(k.shape)} and v.shape={tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise InputError(
            f"q and k must have the same head dim d_k (last axis), got q.shape={tuple(q.shape)} "
            f"and k.shape={tuple(k.shape)}."
        )
    if q.ndim != k.ndim or q.shape[:-3] != k.shape[:-3] or q.shape[-2] != k.shape[-2]:
        raise InputError(
            f"q and k must agree on [batch...] and heads, got q.shape={tuple(q.shape)} and k.shape={tuple(k.shape)}."
        )
    return q, k, v


def check_causal_lengths(q, k):
    if q.shape[-3] != k.shape[-3]:
        raise InputError(
            f"is_causal=True needs q_len == kv_len, got q_len={q.shape[-3]} and kv_len={k.shape[-3]}; "
            "to decode one token at a time pass it with initial_state= (the state of the tokens before it)."
        )


ADDITIVE_MASK = (
    "mask has negative entries or is all zeros: it looks like an additive mask (0 = attend, -inf = masked, as "
    "PyTorch's attn_mask or a bias). rfa follows Flax's convention: a mask is multiplicative, nonzero (True) = "
    "attend, so an all-zero mask attends nothing. Convert it with `mask = additive_mask == 0`, or pass mask=None "
    "for no masking."
)


def as_bool_mask(mask, meaning: str = "attend") -> Array:
    """``mask`` as a bool array: any bool or numeric dtype is accepted, nonzero meaning ``meaning``.

    Flax's ``make_attention_mask``, ``make_causal_mask`` and ``combine_masks`` return float masks of
    0 and 1. A float mask with a negative entry, or of zeros only, is an additive mask (0 / -inf; all zeros is
    PyTorch's "no masking") and is refused, under ``jit`` when the compiled call runs
    (:func:`rfa.checks.raise_if`). A bool mask of False only is taken as written: nothing attended, outputs 0.
    """
    if not hasattr(mask, "dtype") or not hasattr(mask, "shape"):
        raise InputTypeError(f"mask must be an array (nonzero or True = {meaning}), got {type(mask).__name__}.")
    if not (mask.dtype == jnp.bool_ or jnp.issubdtype(mask.dtype, jnp.number)):
        raise InputTypeError(f"mask must have a bool or numeric dtype (nonzero = {meaning}), got {mask.dtype}.")
    mask = jnp.asarray(mask)
    if jnp.issubdtype(mask.dtype, jnp.floating):
        raise_if(jnp.any(mask < 0) | jnp.all(mask == 0), ADDITIVE_MASK)
    return mask if mask.dtype == jnp.bool_ else mask != 0


def check_mask(mask, q, k) -> Array:
    """Checks that ``mask`` is broadcastable to ``[batch..., heads, q_len, kv_len]``; returns it as bool."""
    mask = as_bool_mask(mask)
    target = q.shape[:-3] + (q.shape[-2], q.shape[-3], k.shape[-3])
    check_broadcastable_to(mask.shape, target, "mask", "[batch..., heads, q_len, kv_len] =")
    return mask


def with_ones_column(v: Array) -> Array:
    """``[v, 1]``: one contraction then yields both the numerator (``A v``) and the normalizer (``A 1``)."""
    return jnp.concatenate([v, jnp.ones(v.shape[:-1] + (1,), v.dtype)], axis=-1)


def renormalize(numerator: Array, normalizer: Array) -> Array:
    """``D⁻¹ (A V)``: divides each query's numerator by its normalizer ``D = A 1``.

    A normalizer of exactly 0 (a query that attends to no key) gives an output of 0 instead of NaN.

    Args:
      numerator: ``[..., q_len, heads, d_v]``, the unnormalized output ``A V``.
      normalizer: ``[..., q_len, heads]``, the row sums ``A 1``.

    Returns:
      ``[..., q_len, heads, d_v]`` in the numerator's dtype.

    Example:
      >>> q = k = v = 0.5 * jnp.ones((2, 5, 4, 8))
      >>> num, den = rfa.unnormalized_softmax_attention(q, k, v)
      >>> bool(jnp.allclose(rfa.renormalize(num, den), rfa.softmax_attention(q, k, v), atol=1e-6))
      True
    """
    numerator = check_floating(numerator, "numerator")
    normalizer = check_floating(normalizer, "normalizer")
    if numerator.shape[:-1] != normalizer.shape:
        raise InputError(
            f"normalizer must have shape numerator.shape[:-1] = {tuple(numerator.shape[:-1])}, "
            f"got {tuple(normalizer.shape)}."
        )
    dtype = computation_dtype(numerator, normalizer)
    den = normalizer.astype(dtype)
    safe = jnp.where(den == 0, 1.0, den)
    return (numerator.astype(dtype) / safe[..., None]).astype(numerator.dtype)
