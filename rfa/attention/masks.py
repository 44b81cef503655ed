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
and must never give a silently wrong answer. With concrete values :func:`plan_mask` raises a
``ValueError`` naming the pattern it found. Under ``jit`` the values are traced, so the pattern is
told apart at run time: the attention selects its compiled form with ``lax.switch``, and an
unsupported mask raises the error when the compiled call runs (:func:`rfa.checks.raise_if`; the
branch it would have run returns NaN and is never read). A mask whose q_len axis has size 1 is key
padding by its shape and needs no check at all.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rfa._validation import is_concrete
from rfa.attention.common import check_mask

Array = jax.Array

PADDING, CAUSAL, UNSUPPORTED = 0, 1, 2

ADVICE = (
    "Kernelized attention applies padding masks (keep_q ⊗ keep_k) and causal ∧ padding masks exactly "
    "(see rfa.attention.masks); use exact attention at this site (rfa.softmax_attention, or Flax's default "
    "attention_fn) for other masks."
)
TRACED_MESSAGE = (
    "rfa.kernelized_attention got a mask that is neither padding nor causal ∧ padding, or a causal mask for a "
    "feature map whose parameters are fitted from the data. " + ADVICE
)


class MaskPlan(NamedTuple):
    """How kernelized attention applies a mask.

    Attributes:
      keep_keys: ``[batch..., heads or 1, kv_len]`` bool, the keys some query attends; None: all.
      keep_queries: ``[batch..., heads or 1, q_len]`` bool, the queries that attend some key; None: all.
      pattern: :data:`PADDING`, :data:`CAUSAL` or :data:`UNSUPPORTED`; a Python int when the mask's
        shape or concrete values decide it, a traced int32 scalar under ``jit``.
    """

    keep_keys: Array | None
    keep_queries: Array | None
    pattern: int | Array


def plan_mask(mask, q: Array, k: Array, *, is_causal: bool) -> MaskPlan:
    """Reduces ``mask`` to the keys and queries kept and the pattern of the attention to run.

    Args:
      mask: None, or an array of any bool or numeric dtype (nonzero = attend) broadcastable to
        ``[batch..., heads, q_len, kv_len]``.
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      is_causal: the call's own causal flag; the mask is then combined with the causal mask.

    Returns:
      A :class:`MaskPlan`.

    Raises:
      ValueError: for concrete mask values of an unsupported pattern, naming it.

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
    if is_concrete(mask):
        if bool(jnp.all(is_padding)):
            return MaskPlan(keep_keys, keep_queries, PADDING)
        if bool(jnp.all(is_causal_padding)):
            return MaskPlan(keep_keys, keep_queries, CAUSAL)
        found = describe(np.asarray(mask), np.asarray(is_padding | is_causal_padding))
        raise ValueError(f"kernelized attention cannot apply this mask: {found}. {ADVICE}")
    pattern = jnp.where(jnp.all(is_padding), PADDING, jnp.where(jnp.all(is_causal_padding), CAUSAL, UNSUPPORTED))
    return MaskPlan(keep_keys, keep_queries, pattern.astype(jnp.int32))


def describe(mask: np.ndarray, applicable: np.ndarray) -> str:
    """Names the pattern of a concrete boolean mask ``[..., q_len, kv_len]`` that cannot be applied.

    ``applicable [...]`` says which ``[q_len, kv_len]`` slices are padding or causal ∧ padding.
    """
    if applicable.all():
        return f"the mask of shape {mask.shape} mixes padding slices and causal slices along its leading axes"
    index = int(np.argmin(applicable.reshape(-1)))
    m = mask.reshape((-1,) + mask.shape[-2:])[index]
    if not np.any(np.triu(m, 1)):
        kind = "lower-triangular but not causal ∧ padding (a sliding window, or a causal mask with holes)"
    elif not np.any(np.tril(m, -1)):
        kind = "upper-triangular (anti-causal)"
    else:
        kind = "a dense pattern: neither triangular nor one row of kept keys (a prefix-LM, block or random mask)"
    position = tuple(int(i) for i in np.unravel_index(index, mask.shape[:-2]))
    return f"the mask of shape {mask.shape} is {kind} at index {position} of its leading axes"
