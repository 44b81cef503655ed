"""Mutants of rfa/layers/ that the pretrained families' checkpoints catch (issue 70): the parts Qwen3 and Qwen3.5
add to the layers (the query and key norms, grouped-query heads, the output gate, partial rotary, the zero-centered
norm, the mixture of experts, multi-head latent attention); the families' own, of rfa/models/, are in models.py."""

from .mutant import Mutant
from .paths import QWEN3_TESTS

MUTANTS = [
    Mutant(
        "qwen3-query-norm-dropped",
        "rfa/layers/multi_head.py",
        "        return self._rotate(q if self.query_norm is None else self.query_norm(q), positions)\n",
        "        return self._rotate(q, positions)\n",
        (QWEN3_TESTS,),
        "a Qwen3 checkpoint's q_norm is loaded but never applied",
    ),
    Mutant(
        "qwen3-gqa-heads-tiled",
        "rfa/layers/multi_head.py",
        "        return jnp.repeat(k, self.groups, axis=-2), jnp.repeat(v, self.groups, axis=-2)\n",
        "        return jnp.tile(k, (1, 1, self.groups, 1)), jnp.tile(v, (1, 1, self.groups, 1))\n",
        (QWEN3_TESTS,),
        "each key/value head serves the wrong group of query heads (tiled, not repeated as transformers' repeat_kv)",
    ),
    Mutant(
        "rms-norm-zero-centered-read-as-plain",
        "rfa/layers/norms.py",
        "            return (h * (1 + weight.astype(dtype))).astype(x.dtype)\n",
        "            return (h * weight.astype(dtype)).astype(x.dtype)\n",
        ("tests/layers/test_norms_and_mlp.py",),
        "a zero-centered RMSNorm (Qwen3.5, Qwen3-Next) scales by w, not 1 + w",
    ),
    Mutant(
        "attention-output-gate-dropped",
        "rfa/layers/multi_head.py",
        "        if self.gate is not None:\n",
        "        if False:\n",
        (QWEN3_TESTS,),
        "gated attention's sigmoid gate (Qwen3.5's full-attention layers) is never applied",
    ),
    Mutant(
        "partial-rotary-whole-head",
        "rfa/layers/positional.py",
        "    rotated = int(x.shape[-1] * fraction)\n",
        "    rotated = x.shape[-1]\n",
        (QWEN3_TESTS,),
        "partial rotary (partial_rotary_factor) rotates the whole head",
    ),
    Mutant(
        "moe-top-k-not-renormalized",
        "rfa/layers/moe.py",
        "        if o.norm_topk_prob:\n",
        "        if False:\n",
        (QWEN3_TESTS, "tests/layers/test_moe.py"),
        "the top experts' probabilities kept raw where norm_topk_prob asks them to sum to 1",
    ),
    Mutant(
        "moe-shared-expert-gate-dropped",
        "rfa/layers/moe.py",
        "out = out + (shared if self.shared_gate is None else jax.nn.sigmoid(self.shared_gate(h)) * shared)",
        "out = out + shared",
        (QWEN3_TESTS, "tests/layers/test_moe.py"),
        "the shared expert's sigmoid gate (Qwen3-Next's shared_expert_gate) is never applied",
    ),
    Mutant(
        "router-choice-without-correction-bias",
        "rfa/layers/moe.py",
        "            choice = scores + self.bias[...]\n",
        "            choice = scores\n",
        (QWEN3_TESTS,),
        "Kimi Linear's router chooses its experts by their scores alone, without DeepSeek-V3's correction bias",
    ),
    Mutant(
        "mla-shared-and-per-head-key-parts-swapped",
        "rfa/layers/mla.py",
        "jnp.concatenate([kv[..., :nope], shared.astype(kv.dtype)], axis=-1)",
        "jnp.concatenate([shared.astype(kv.dtype), kv[..., :nope]], axis=-1)",
        (QWEN3_TESTS,),
        "MLA's key built [shared rope part, per-head nope part], against the queries' [nope, rope]",
    ),
    Mutant(
        "kda-output-gate-bias-kept",
        "rfa/layers/delta_rule/layer.py",
        "low_rank(d, dv, hv * dv, bias=o.output_gate_bias, **widths)",
        "low_rank(d, dv, hv * dv, bias=True, **widths)",
        (QWEN3_TESTS,),
        "KDA's low-rank output gate keeps fla's bias where Kimi Linear's checkpoint has none",
    ),
]
