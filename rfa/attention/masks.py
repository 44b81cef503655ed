"""Which attention masks kernelized attention can apply, told apart by the mask's values.

Flax builds masks as dense ``[batch..., heads, q_len, kv_len]`` arrays of 0/1 (``make_attention_mask``,
``make_causal_mask`` and ``combine_masks`` return float32 or the model's dtype). Kernelized attention
never forms the q_len × kv_len matrix, so it can apply a mask only where the mask factors through its
sums. Reduce a mask ``M`` (nonzero = attend) to the keys some query attends and the queries that
attend some key,

    keep_k[j] = ∨_i M[i, j],    keep_q[i] = ∨_j M[i, j].

Two patterns are then exact, and they cover what Flax models pass:

==================  ====================================  =================================================
pattern             M[i, j]                               built in Flax by
==================  ====================================  =================================================
padding             keep_q[i] ∧ keep_k[j]                 ``make_attention_mask(q_valid, k_valid)``; a key
                                                          mask ``[..., 1, kv_len]``; the decode-cache mask
causal ∧ padding    (j <= i) ∧ keep_q[i] ∧ keep_k[j]      ``combine_masks(make_causal_mask(x), padding)``
==================  ====================================  =================================================

Padding runs the bidirectional form without the keys outside ``keep_k``; causal ∧ padding runs the
chunked causal form with the same key padding. A query outside ``keep_q`` (a padded query) attends
no key: its output is 0, as for every query that sees no key, and its input is zeroed before the
feature map, so whatever it holds (inf, NaN) changes no other output.

Any other mask (a sliding window, a prefix-LM or block mask, a random dense one) cannot be applied
and must never give a silently wrong answer. With concrete values :func:`plan_mask` raises an
``InputError`` naming the pattern it found. Under ``jit`` the values are traced, so the pattern is
told apart at run time: the attention selects its compiled form with ``lax.switch``, and an
unsupported mask raises the same error when the compiled call runs (:func:`rfa.checks.raise_if`, with the
pattern found on the device; the branch it would have run returns NaN and is never read). A mask whose q_len
axis has size 1 is key padding by its shape and needs no check at all.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rfa._validation import InputError, is_concrete
from rfa.attention.common import check_mask

Array = jax.Array

PADDING, CAUSAL, UNSUPPORTED = 0, 1, 2

ADVICE = (
    "Kernelized attention applies padding masks (keep_q ⊗ keep_k) and causal ∧ padding masks exactly "
    "(see rfa.attention.masks); use exact attention at this site (rfa.softmax_attention, or Flax's default "
    "attention_fn) for other masks."
)


class MaskPlan(NamedTuple):
    """How kernelized attention applies a mask.

    Attributes:
      keep_keys: ``[batch..., heads or 1, kv_len]`` bool, the keys some query attends; None: all.
      keep_queries: ``[batch..., heads or 1, q_len]`` bool, the queries that attend some key; None: all.
      pattern: :data:`PADDING`, :data:`CAUSAL` or :data:`UNSUPPORTED`; a Python int when the mask's
        shape or concrete values decide it, a traced int32 scalar under ``jit``.
      found: under ``jit``, ``(shape, [kind, index])``: the mask's shape and the int32 array of
        :func:`found_pattern`, from which :func:`unsupported_message` writes the error a concrete mask raises;
        else None.
    """

    keep_keys: Array | None
    keep_queries: Array | None
    pattern: int | Array
    found: tuple[tuple[int, ...], Array] | None = None


def plan_mask(mask, q: Array, k: Array, *, is_causal: bool, refusal=None) -> MaskPlan:
    """Reduces ``mask`` to the keys and queries kept and the pattern of the attention to run.

    Args:
      mask: None, or an array of any bool or numeric dtype (nonzero = attend) broadcastable to
        ``[batch..., heads, q_len, kv_len]``.
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      is_causal: the call's own causal flag; the mask is then combined with the causal mask.
      refusal: ``(shape, found) -> str``, the error of a concrete mask that cannot be applied (default
        :func:`unsupported_message`, kernelized attention's; a layer passes its own words).

    Returns:
      A :class:`MaskPlan`.

    Raises:
      InputError: for concrete mask values of an unsupported pattern, naming it.

    Example:
      >>> q = k = jnp.ones((2, 5, 4, 8))
      >>> causal = flax.nnx.make_causal_mask(jnp.ones((2, 5)))  # float32 [2, 1, 5, 5]
      >>> plan_mask(causal, q, k, is_causal=False).pattern == CAUSAL
      True
    """
    requested = CAUSAL if is_causal else PADDING
    if mask is None:
        return MaskPlan(None, None, requested)
    mask = check_mask(mask, q, k)
    q_len, kv_len = q.shape[-3], k.shape[-3]
    mask = mask.reshape((1,) * (len(q.shape) - mask.ndim) + mask.shape)  # [batch..., heads, q_len, kv_len]
    if mask.shape[-2] == 1:  # constant along q_len: key padding by its shape
        return MaskPlan(jnp.broadcast_to(mask[..., 0, :], mask.shape[:-2] + (kv_len,)), None, requested)
    mask = jnp.broadcast_to(mask, mask.shape[:-2] + (q_len, kv_len))
    tril = jnp.tril(jnp.ones((q_len, kv_len), jnp.bool_))
    if is_causal:
        mask = mask & tril
    keep_keys, keep_queries = jnp.any(mask, axis=-2), jnp.any(mask, axis=-1)
    padding = keep_queries[..., :, None] & keep_keys[..., None, :]
    # Per [batch..., heads] slice: does the mask have the pattern?
    no = jnp.zeros(mask.shape[:-2], jnp.bool_)
    is_padding = no if is_causal else jnp.all(mask == padding, axis=(-2, -1))
    is_causal_padding = jnp.all(mask == (padding & tril), axis=(-2, -1)) if q_len == kv_len else no
    applicable = is_padding | is_causal_padding
    if is_concrete(mask):
        if bool(jnp.all(is_padding)):
            return MaskPlan(keep_keys, keep_queries, PADDING)
        if bool(jnp.all(is_causal_padding)):
            return MaskPlan(keep_keys, keep_queries, CAUSAL)
        raise InputError((refusal or unsupported_message)(mask.shape, found_pattern(mask, applicable)))
    pattern = jnp.where(jnp.all(is_padding), PADDING, jnp.where(jnp.all(is_causal_padding), CAUSAL, UNSUPPORTED))
    return MaskPlan(keep_keys, keep_queries, pattern.astype(jnp.int32), (mask.shape, found_pattern(mask, applicable)))


MIXED, LOWER, UPPER, DENSE = range(4)  # the kinds of unsupported mask found_pattern tells apart
_KINDS = {
    LOWER: "lower-triangular but not causal ∧ padding (a sliding window, or a causal mask with holes)",
    UPPER: "upper-triangular (anti-causal)",
    DENSE: "a dense pattern: neither triangular nor one row of kept keys (a prefix-LM, block or random mask)",
}


def found_pattern(mask: Array, applicable: Array) -> Array:
    """int32 ``[kind, index]`` of a boolean mask ``[..., q_len, kv_len]`` that cannot be applied: ``kind`` is
    :data:`MIXED` when every slice is padding or causal ∧ padding (``applicable [...]``) but not all alike, else
    the shape of the first slice that is neither (:data:`LOWER`, :data:`UPPER`, :data:`DENSE`), at flat
    ``index`` of the leading axes. On the device under ``jit``, so a traced check can name what it found."""
    index = jnp.argmin(applicable.reshape(-1))
    m = mask.reshape((-1,) + mask.shape[-2:])[index]
    kind = jnp.where(~jnp.any(jnp.triu(m, 1)), LOWER, jnp.where(~jnp.any(jnp.tril(m, -1)), UPPER, DENSE))
    return jnp.stack([jnp.where(jnp.all(applicable), MIXED, kind), index]).astype(jnp.int32)


def unsupported_message(
    shape: tuple[int, ...], found, *, who: str = "kernelized attention", advice: str = ADVICE
) -> str:
    """The error for a mask of ``shape`` that ``who`` cannot apply, from ``found``, the ``[kind, index]`` of
    :func:`found_pattern`, followed by ``advice`` (what ``who`` applies, and what to use for other masks)."""
    kind, index = (int(x) for x in np.asarray(found))
    if kind == MIXED:
        found = f"the mask of shape {tuple(shape)} mixes padding slices and causal slices along its leading axes"
    else:
        position = tuple(int(i) for i in np.unravel_index(index, tuple(shape)[:-2]))
        found = f"the mask of shape {tuple(shape)} is {_KINDS[kind]} at index {position} of its leading axes"
    return f"{who} cannot apply this mask: {found}. {advice}"
