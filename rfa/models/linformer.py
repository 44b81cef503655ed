"""Linformer as an attention core of rfa's models (kind ``"linformer"``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.attention.linformer import project_keys_values
from rfa.models.softmax import attend_one, refuse_gate, softmax_attention

Array = jax.Array


class LinformerCore(nnx.Module):
    """Softmax attention over keys and values projected along the length, ``softmax(Q(EK)ᵀ/√d) FV``
    (:mod:`rfa.attention.linformer`, Wang et al. 2020), with ``E, F [k, max_length]`` learned parameters shared by
    the heads; ``k = AttentionConfig.num_features``. Bidirectional only."""

    causal, bidirectional, cross, dense_masks, uses_num_features = False, True, True, False, True
    takes_qk_map = False
    owns_projections = False  # an AttentionSite projects q, k, v and the output around it

    def __init__(self, widths, attention, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        del causal, cross  # never causal (check_site)
        init = nnx.initializers.normal(1 / math.sqrt(widths.max_length))
        shape = (attention.num_features, widths.max_length)
        self.key_projection = nnx.Param(init(rngs.params(), shape))
        self.value_projection = nnx.Param(init(rngs.params(), shape))
        self.max_length = widths.max_length

    @staticmethod
    def check_site(site: str, attention, widths, *, causal: bool, stateful: bool) -> None:
        refuse_gate(site, attention)
        if causal:
            raise InputError(
                f"{site}: linformer projects keys and values along the whole length, so every projected key "
                "mixes in future positions: it cannot be causal or decode token by token. Use it at encoder or "
                "cross-attention sites, and softmax or a kernelized kind at the decoder's self-attention."
            )
        if widths.positional == "relative":
            raise InputError(f"{site}: linformer's keys are mixtures of positions, so a relative bias has no meaning.")

    def _project(self, k, v, key_mask):
        length = k.shape[1]
        if length > self.max_length:
            raise InputError(
                f"linformer was built for sequences of at most max_length = {self.max_length} tokens (its E and F "
                f"are [k, max_length]), got {length}; build the model with a larger max_length."
            )
        return project_keys_values(k, v, self.key_projection[...], self.value_projection[...], key_mask)

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions) -> Array:
        return softmax_attention(q, *self._project(k, v, key_mask))

    def prepare_memory(self, k, v, key_mask):
        projected_k, projected_v = self._project(k, v, key_mask)
        return {"k": projected_k, "v": projected_v, "mask": jnp.ones(projected_k.shape[:2], jnp.bool_)}

    def attend_memory(self, q, prepared):
        return attend_one(q[:, 0], prepared["k"], prepared["v"], prepared["mask"], None).astype(q.dtype)
