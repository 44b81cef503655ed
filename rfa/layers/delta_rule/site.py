"""The delta rule's kinds at a model's site: ``"deltanet"``, ``"gated_deltanet"`` and ``"kda"``, each
:class:`DeltaRuleCore` with its :class:`~rfa.layers.delta_rule.options.DeltaRuleSpec` (the layer owns its
projections: no q/k/v/output projections around it), registered here with the variants of the kernelized delta rule.
"""

from __future__ import annotations

import functools

import jax
from flax import nnx

from rfa.layers.delta_rule.layer import DeltaRuleLayer
from rfa.layers.delta_rule.options import DeltaRuleOptions, DeltaRuleSpec
from rfa.layers.kinds import AttentionKind, SiteWidths, register_attention_kind, register_variant

Array = jax.Array

DELTANET = DeltaRuleSpec(decay=None, output_gate="full", gated_by_default=False, fla_name="DeltaNet")
GATED_DELTANET = DeltaRuleSpec(decay="head", output_gate="full", gated_by_default=True, fla_name="GatedDeltaNet")
KIMI_DELTA_ATTENTION = DeltaRuleSpec(
    decay="channel", output_gate="low_rank", gated_by_default=True, fla_name="KimiDeltaAttention"
)


class DeltaRuleCore(nnx.Module):
    """A model's causal self-attention site of a delta-rule kind: :class:`DeltaRuleLayer` from the model's widths,
    with the site interface of :class:`rfa.layers.multi_head.AttentionSite`."""

    def __init__(
        self,
        widths: SiteWidths,
        options: DeltaRuleOptions,
        *,
        spec: DeltaRuleSpec,
        causal: bool,
        cross: bool,
        rngs: nnx.Rngs,
    ):
        del causal, cross  # causal self-attention only (the kind's)
        self.layer = DeltaRuleLayer(
            spec,
            options,
            widths.d_model,
            options.num_heads or widths.num_heads,
            sequence_axis=widths.sequence_axis,
            dtype=widths.dtype,
            rngs=rngs,
        )
        self.causal = True

    def __call__(
        self, x: Array, memory=None, *, key_mask: Array, q_positions: Array, k_positions: Array, segment_ids=None
    ) -> Array:
        del memory, q_positions, k_positions  # self-attention; the convolution gives position
        return self.layer.run(x, key_mask, segment_ids=segment_ids)[0]

    def init_cache(self, batch: int, max_length: int) -> dict:
        """The empty state and convolution history (``max_length`` plays no part: the cache does not grow)."""
        del max_length
        return self.layer.empty_state(batch)

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int):
        del positions, max_length
        return self.layer.run(x, key_mask, prefill=True)  # a short prompt by the recurrent form

    def decode_step(self, x: Array, cache: dict, position: Array, keep: Array):
        del position
        out, cache = self.layer.run(x[:, None], keep[:, None], cache)  # a padding token changes nothing
        return out[:, 0], cache


for _name, _spec, _summary in (
    ("deltanet", DELTANET, "DeltaNet (Yang et al., NeurIPS 2024), fla's layer"),
    ("gated_deltanet", GATED_DELTANET, "Gated DeltaNet (Yang et al., ICLR 2025): a decay per value head"),
    ("kda", KIMI_DELTA_ATTENTION, "Kimi Delta Attention (Kimi Linear, 2025): a decay per key channel"),
):
    register_attention_kind(
        AttentionKind(
            _name,
            DeltaRuleOptions,
            functools.partial(DeltaRuleCore, spec=_spec),
            causal=True,
            bidirectional=False,
            cross=False,
            cache="fixed",
            summary=_summary + "; causal self-attention only, a state of fixed size as cache",
        )
    )
register_variant("gated_deltanet_positive", "gated_deltanet", qk_map="positive")  # the kernelized delta rule
register_variant("gated_deltanet_elu", "gated_deltanet", qk_map="elu")  # the delta rule with elu+1 features
