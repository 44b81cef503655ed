"""Mutants of rfa/models/: the configs and sites, the blocks, decoding, the vision models, the forecaster (the
layers' are in layers.py).

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import HYBRID_TESTS, QWEN3_TESTS

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
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
        "        return at_least_float32(forecast + level)\n",
        "        return at_least_float32(forecast)\n",
        ("tests/models/test_forecaster.py",),
        "the forecaster centres each window but never adds its level back",
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
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "forecaster-accepts-nan",
        "rfa/models/forecaster.py",
        "            ~jnp.all(jnp.isfinite(x)),\n",
        "            False,\n",
        ("tests/test_checks.py",),
        "NaN series reach the forecaster's output",
    ),
    # Fourier integral attention (issue 30).
    # One decay per feature (issue 30).
    # Length generalization and estimators inside models (issues 30 and 31).
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
    # One registry of attention kinds (issue 68).
    Mutant(
        "site-variant-options-dropped",
        "rfa/models/site.py",
        "            options = entry.options(**{**preset, **fields})\n",
        "            options = entry.options(**fields)\n",
        ("tests/layers/test_kinds.py",),
        "a variant's name gives its kind with default options (gla ungated)",
    ),
    Mutant(
        "site-role-unchecked",
        "rfa/models/config.py",
        "                if not attention.entry.runs(role):\n",
        "                if False:\n",
        (
            "tests/models/test_delta_window_hybrid.py::"
            "test_a_bidirectional_site_a_second_gate_or_a_window_across_sequences_is_refused",
        ),
        "a kind placed at a site it cannot run (a window across two sequences)",
    ),
    # Real checkpoints (issue 70).
    Mutant(
        "qwen3-rope-theta-ignored",
        "rfa/models/pretrained.py",
        '    theta = float(rope.pop("rope_theta", hf.get("rope_theta", default_theta)))\n',
        "    theta = default_theta\n",
        (QWEN3_TESTS,),
        "the checkpoint's rotary base replaced by Qwen3's default",
    ),
    Mutant(
        "qwen3-output-projection-transposed",
        "rfa/models/pretrained.py",
        "            lambda w: (w.T.reshape(*inputs, *outputs),),\n",
        "            lambda w: (w.reshape(*outputs, *inputs).T.reshape(*inputs, *outputs),),\n",
        (QWEN3_TESTS,),
        "a PyTorch Linear's [out, in] weight read with its axes' parts in the wrong order",
    ),
    Mutant(
        "pretrained-unknown-field-accepted",
        "rfa/models/pretrained.py",
        "    unknown = sorted(set(hf) - reproduced - inert)\n",
        "    unknown = []\n",
        (QWEN3_TESTS,),
        "a config.json field rfa does not reproduce is ignored",
    ),
    Mutant(
        "qwen3_5-query-and-gate-swapped",
        "rfa/models/qwen3_5.py",
        "        return w[:, :, 0], w[:, :, 1]\n",
        "        return w[:, :, 1], w[:, :, 0]\n",
        (QWEN3_TESTS,),
        "Qwen3.5's fused q_proj read with each head's gate rows as its query's",
    ),
    Mutant(
        "qwen3_5-convolution-split-misordered",
        "rfa/models/qwen3_5.py",
        '            for name in ("q_conv1d", "k_conv1d", "v_conv1d")\n',
        '            for name in ("k_conv1d", "q_conv1d", "v_conv1d")\n',
        (QWEN3_TESTS,),
        "the one depthwise convolution over [q | k | v] split with the query's and key's taps exchanged",
    ),
    Mutant(
        "qwen3_5-decoder-norms-plain",
        "rfa/models/qwen3_5.py",
        "zero_centered_norms=True)",
        "zero_centered_norms=False)",
        (QWEN3_TESTS,),
        "Qwen3.5's zero-centered decoder norms read as x · w",
    ),
    Mutant(
        "qwen3_next-qkvz-read-contiguous",
        "rfa/models/qwen3_next.py",
        "groups=groups, sizes=(dk, dk, per * dv, per * dv)",
        "groups=1, sizes=(groups * dk, groups * dk, groups * per * dv, groups * per * dv)",
        (QWEN3_TESTS,),
        "Qwen3-Next's in_proj_qkvz read as [q | k | v | z] whole, not per key-head group",
    ),
    Mutant(
        "causal-lm-final-norm-dropped",
        "rfa/models/causal_lm.py",
        "        x = self.norm(x)\n        return at_least_float32",
        "        return at_least_float32",
        (QWEN3_TESTS,),
        "the pretrained decoders' final RMSNorm is loaded but never applied before the output projection",
    ),
    # Packed sequences and bad inputs at the model level (issue 70).
    Mutant(
        "delta-rule-site-ignores-packing",
        "rfa/layers/delta_rule/site.py",
        "return self.layer.run(x, key_mask, segment_ids=segment_ids)[0]",
        "return self.layer.run(x, key_mask)[0]",
        ("tests/models/test_models.py::test_a_packed_row_is_each_sequence_alone",),
        "a delta-rule layer in a model carries its state and convolution across the packed sequences of a row",
    ),
    Mutant(
        "packed-positions-do-not-restart",
        "rfa/models/transformer.py",
        "return jnp.asarray(segment_ids), sequence_positions(segment_ids)",
        "return jnp.asarray(segment_ids), _positions(tokens)",
        ("tests/models/test_models.py::test_a_packed_row_is_each_sequence_alone",),
        "a packed row's absolute positions count the row's slots, not each sequence's tokens",
    ),
    Mutant(
        "traced-token-ids-unchecked",
        "rfa/models/transformer.py",
        "    raise_if((tokens < 0) | (tokens >= vocab_size), message, values=(jnp.min(tokens), jnp.max(tokens)))\n",
        "",
        ("tests/models/test_models.py::test_bad_inputs_are_refused_under_jit_too",),
        "token ids outside the vocabulary pass under jit (NaN logits, a negative id wrapping around)",
    ),
    Mutant(
        "kv-cache-slot-unchecked",
        "rfa/layers/softmax.py",
        """        check_slot(position, cache["k"].shape[1], "the cache's slots")\n""",
        "",
        ("tests/models/test_models.py::test_bad_inputs_are_refused_under_jit_too",),
        "a decoding step past a KV cache's last slot overwrites that slot with no error",
    ),
]
