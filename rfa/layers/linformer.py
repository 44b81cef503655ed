"""Linformer between a site's projections (the kind ``"linformer"``)."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.attention.linformer import project_keys_values
from rfa.layers.kinds import AttentionKind, SiteWidths, check_int, register_attention_kind
from rfa.layers.multi_head import HeadsOptions, projected
from rfa.layers.softmax import attend_one, softmax_attention

Array = jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinformerOptions(HeadsOptions):
    """Linformer's options: the heads' and the projected length.

    Attributes:
      projected_length: k, the length keys and values are projected to.

    Example:
      >>> LinformerOptions(projected_length=32).size()
      32
    """

    SIZE = "projected_length"

    projected_length: int = 256

    def __post_init__(self):
        super().__post_init__()
        check_int(self, "projected_length")

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        super().check_site(site, widths, causal=causal, stateful=stateful)
        if causal:
            raise InputError(
                f"{site}: linformer projects keys and values along the whole length, so every projected key "
                "mixes in future positions: it cannot be causal or decode token by token. Use it at encoder or "
                "cross-attention sites, and softmax or a kernelized kind at the decoder's self-attention."
            )
        if widths.positional == "relative":
            raise InputError(f"{site}: linformer's keys are mixtures of positions, so a relative bias has no meaning.")


class LinformerCore(nnx.Module):
    """Softmax attention over keys and values projected along the length, ``softmax(Q(EK)ᵀ/√d) FV``
    (:mod:`rfa.attention.linformer`, Wang et al. 2020), with ``E, F [k, max_length]`` learned parameters shared by
    the heads; ``k = LinformerOptions.projected_length``. Bidirectional only."""

    def __init__(self, widths: SiteWidths, options: LinformerOptions, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        del causal, cross  # never causal (LinformerOptions.check_site)
        init = nnx.initializers.normal(1 / math.sqrt(widths.max_length))
        shape = (options.projected_length, widths.max_length)
        self.key_projection = nnx.Param(init(rngs.params(), shape))
        self.value_projection = nnx.Param(init(rngs.params(), shape))
        self.max_length = widths.max_length

    def _project(self, k, v, key_mask):
        length = k.shape[1]
        if length > self.max_length:
            raise InputError(
                f"linformer was built for sequences of at most max_length = {self.max_length} tokens (its E and F "
                f"are [k, max_length]), got {length}; build the model with a larger max_length."
            )
        return project_keys_values(k, v, self.key_projection[...], self.value_projection[...], key_mask)

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions, segment_ids=None) -> Array:
        if segment_ids is not None:
            raise InputError(
                "linformer cannot attend within packed sequences (segment_ids): its E and F mix every key of a row."
            )
        return softmax_attention(q, *self._project(k, v, key_mask))

    def prepare_memory(self, k, v, key_mask):
        projected_k, projected_v = self._project(k, v, key_mask)
        return {"k": projected_k, "v": projected_v, "mask": jnp.ones(projected_k.shape[:2], jnp.bool_)}

    def attend_memory(self, q, prepared):
        return attend_one(q[:, 0], prepared["k"], prepared["v"], prepared["mask"], None).astype(q.dtype)


register_attention_kind(
    AttentionKind(
        "linformer",
        LinformerOptions,
        projected(LinformerCore),
        causal=False,
        bidirectional=True,
        cross=True,
        cache=None,
        summary="Linformer (Wang et al. 2020): keys and values projected along the length; bidirectional only",
    )
)
