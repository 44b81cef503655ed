"""Mutants of rfa/models/ but its layers with a state (models_state_layers.py): the attention cores, the blocks,
decoding, positions, the vision models, the forecaster.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import HYBRID_TESTS

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "rotary-not-relative",
        "rfa/layers/positional.py",
        "    angle = positions[..., None, None].astype(jnp.float32) * rate",
        "    angle = positions[..., None, None].astype(jnp.float32) ** 2 * rate",
        ("tests/models/test_positional.py",),
        "rotary angle grows with position², scores stop being relative",
    ),
    # Attention forms.
    Mutant(
        "vit-without-positions",
        "rfa/models/vision.py",
        "        return self.dropout(x + self.positions().astype(x.dtype))\n",
        "        return self.dropout(x)\n",
        ("tests/models/test_vision.py",),
        "the ViT's patches carry no position",
    ),
    Mutant(
        "swin-shift-unmasked",
        "rfa/models/swin.py",
        "        mask = jnp.broadcast_to(self.mask[...][None, :, None], (batch, count, heads, tokens, tokens))\n",
        "        mask = jnp.ones((batch, count, heads, tokens, tokens), bool)\n",
        ("tests/models/test_swin.py",),
        "shifted windows let tokens from opposite edges of the map attend",
    ),
    Mutant(
        "forecast-level-dropped",
        "rfa/models/forecaster.py",
        "        return (forecast + level).astype(jnp.float32)\n",
        "        return forecast.astype(jnp.float32)\n",
        ("tests/models/test_forecaster.py",),
        "the forecaster centres each window but never adds its level back",
    ),
    Mutant(
        "gate-dropped-in-training",
        "rfa/layers/kernelized.py",
        "options = self._options(x if self.causal else None)",
        "options = self._options(None)",
        ("tests/models/test_attention_kinds.py",),
        "a gated site trains and teacher-forces without its gate",
    ),
    # Models.
    Mutant(
        "embedding-not-scaled",
        "rfa/models/transformer.py",
        "        self.scale = math.sqrt(config.d_model)",
        "        self.scale = 1.0",
        ("tests/models",),
        "token embeddings not multiplied by √d_model",
    ),
    Mutant(
        "beam-pool-unpenalized",
        "rfa/models/decoding.py",
        "top_log_probs / penalty(t + 1)",
        "top_log_probs",
        ("tests/models/test_models.py::test_the_length_penalty_steers_the_search",),
        "finished hypotheses enter the beam pool by raw log-probability, not the GNMT score",
    ),
    Mutant(
        "beam-bound-too-tight",
        "rfa/models/decoding.py",
        "bound_length = max_new_tokens if length_penalty >= 0 else t + 1",
        "bound_length = t + 1",
        ("tests/models/test_models.py::test_the_length_penalty_steers_the_search",),
        "beam search stops while a live hypothesis could still beat the pool",
    ),
    Mutant(
        "prompt-pass-per-beam",
        "rfa/models/decoding.py",
        "    cache, memories, logits, position = _start(model, inputs, "
        "_cache_length(model, inputs, max_new_tokens), bos_id)\n"
        "    # The prompt pass ran once per input; its beams start from copies of its caches.\n"
        "    cache, memories, logits = jax.tree.map("
        "lambda x: jnp.repeat(x, k, axis=0), (cache, memories, logits))\n",
        "    cache, memories, logits, position = _start(model, jnp.repeat(inputs, k, 0), "
        "_cache_length(model, inputs, max_new_tokens), bos_id)\n",
        ("tests/models/test_models.py::test_beam_search_runs_one_prompt_pass_per_input",),
        "beam search encodes or prefills the prompt once per beam",
    ),
    Mutant(
        "model-prefill-keeps-padding",
        "rfa/layers/kernelized.py",
        "return self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions, return_state",
        "return self(q, k, v, x, key_mask=key_mask | True, q_positions=positions, k_positions=positions, return_state",
        (
            "tests/models/test_models.py::test_greedy_generation_after_a_prefilled_prompt_picks_the_argmax_of_teacher_forcing",
        ),
        "a prefilled prompt's padding enters the kernelized state",
    ),
    Mutant(
        "cross-rotary-always",
        "rfa/layers/kinds.py",
        'return self.positional == "rotary" and (not cross or self.cross_rotary)',
        'return self.positional == "rotary"',
        ("tests/models/test_models.py::test_rotary_positions_at_cross_attention_are_a_per_site_flag",),
        "cross-attention rotated although cross_attention_rotary is off",
    ),
    Mutant(
        "gate-forgotten-when-decoding",
        "rfa/layers/kernelized.py",
        "            return_state=True,\n            **self._options(x),",
        "            return_state=True,\n            **self._options(),",
        ("tests/models/test_attention_kinds.py",),
        "decoding a gated model ignores the gate",
    ),
    Mutant(
        "gate-input-weight-dropped",
        "rfa/layers/kernelized.py",
        '            if "key_log_weight" in self.estimator.names():',
        "            if False:",
        ("tests/models/test_attention_kinds.py", "tests/train"),
        "gated RFA without the (1 - g) weight of new keys",
    ),
    Mutant(
        "kv-cache-float32",
        "rfa/layers/softmax.py",
        '"k": jnp.zeros(shape, self.dtype),\n            "v": jnp.zeros(shape, self.dtype),',
        '"k": jnp.zeros(shape, jnp.float32),\n            "v": jnp.zeros(shape, jnp.float32),',
        ("tests/models/test_models.py::test_low_precision_decoding_equals_teacher_forcing",),
        "exact KV caches in float32 instead of the model's dtype",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "class-position-not-zero",
        "rfa/layers/positional.py",
        "np.concatenate([np.zeros((leading, dim), np.float32), table])",
        "np.concatenate([table[:leading], table])",
        ("tests/models/test_positional.py",),
        "a fixed table gives the class token a patch's position",
    ),
    Mutant(
        "queries-keys-not-sown",
        "rfa/layers/multi_head.py",
        '            self.sow(AttentionInputs, "inputs", (q, k, v, key_mask))',
        '            self.sow(AttentionInputs, "inputs", (k, q, v, key_mask))',
        ("tests/models/test_positional.py",),
        "captured queries and keys swapped",
    ),
    Mutant(
        "forecaster-accepts-nan",
        "rfa/models/forecaster.py",
        "            ~jnp.all(jnp.isfinite(x)),\n",
        "            False,\n",
        ("tests/test_checks.py",),
        "NaN series reach the forecaster's output",
    ),
    # Fourier integral attention (issue 30).
    Mutant(
        "fourier-decode-without-mask",
        "rfa/layers/softmax.py",
        "radius=self.radius, mask=mask[:, None, None, :])[:, 0]",
        "radius=self.radius)[:, 0]",
        ("tests/models/test_attention_kinds.py",),
        "a decoded Fourier token attends to empty cache slots",
    ),
    # One decay per feature (issue 30).
    Mutant(
        "gla-gate-per-head",
        "rfa/layers/kernelized.py",
        "                logits = logits.reshape(logits.shape[:-1] + (self.num_heads, -1))",
        "                logits = logits.reshape(logits.shape[:-1] + (self.num_heads, -1))[..., :1]",
        ("tests/models/test_attention_kinds.py",),
        "a per-feature gate decays every feature by the first one's",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "gqa-kv-heads-tiled",
        "rfa/layers/multi_head.py",
        "        return jnp.repeat(k, self.groups, axis=-2), jnp.repeat(v, self.groups, axis=-2)",
        "        return (jnp.tile(x, (1,) * (x.ndim - 2) + (self.groups, 1)) for x in (k, v))",
        (HYBRID_TESTS,),
        "a site's grouped-query heads read the wrong key/value head",
    ),
    Mutant(
        "rope-base-ignored",
        "rfa/layers/multi_head.py",
        "rotate(x, positions, base=self.rope_base)",
        "rotate(x, positions)",
        (HYBRID_TESTS,),
        "a site's rotary base is left at 10000",
    ),
    Mutant(
        "vit-pools-a-patch",
        "rfa/models/vision.py",
        "        pooled = x[:, 0] if self.cls is not None else x.mean(axis=1)",
        "        pooled = x[:, 1] if self.cls is not None else x.mean(axis=1)",
        ("tests/models/test_vision.py",),
        "the head reads the first patch instead of the class token",
    ),
    Mutant(
        "forecast-level-over-channels",
        "rfa/models/forecaster.py",
        "        level = jnp.mean(x, axis=1, keepdims=True)",
        "        level = jnp.mean(x, axis=(1, 2), keepdims=True)",
        ("tests/models/test_forecaster.py",),
        "one level for all channels of a window instead of one per channel",
    ),
    Mutant(
        "hybrid-drops-a-layer-cache",
        "rfa/models/transformer.py",
        "            new_caches.append(cache)\n",
        "            new_caches.append(caches[i] if i else cache)\n",
        (HYBRID_TESTS,),
        "decoding keeps the old cache of every layer but the first",
    ),
]
