"""Mutants of rfa/attention/ outside kernelized/ and delta_rule/: exact and naive attention, masks, segments,
the chunk's scores, the sliding window, Fourier integral attention, Linformer (the Flax adapter is in layers.py).

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import PACKED_TESTS, PER_FEATURE_TESTS, REFERENCE_TESTS

FOURIER = "rfa/attention/fourier_integral.py"
FOURIER_TESTS = ("tests/attention/test_fourier_integral.py",)
CHUNK_SCORES = "rfa/attention/chunk_scores.py"

MUTANTS = [
    # Masks (issue 13).
    Mutant(
        "causal-mask-read-as-padding",
        "rfa/attention/masks.py",
        "            return MaskPlan(keep_keys, keep_queries, CAUSAL)",
        "            return MaskPlan(keep_keys, keep_queries, PADDING)",
        ("tests/attention/test_masks.py",),
        "a concrete causal mask runs bidirectional attention",
    ),
    # Attention forms.
    Mutant(
        "causal-future-visible",
        CHUNK_SCORES,
        "    causal = jnp.tril(jnp.ones((size, size), jnp.bool_))\n",
        "    causal = jnp.ones((size, size), jnp.bool_)\n",
        REFERENCE_TESTS,
        "inside a chunk queries see later keys",
    ),
    Mutant(
        "decay-includes-the-key-itself",
        CHUNK_SCORES,
        "    between = jnp.tril(jnp.ones((size, size), jnp.bool_), -1)[..., None]",
        "    between = jnp.tril(jnp.ones((size, size), jnp.bool_))[..., None]",
        REFERENCE_TESTS,
        "a key is decayed by its own token's decay",
    ),
    Mutant(
        "naive-decay-sign-flipped",
        "rfa/attention/naive.py",
        "G_q[..., :, None, :] - G_k[..., None, :, :]",
        "G_k[..., None, :, :] - G_q[..., :, None, :]",
        REFERENCE_TESTS,
        "the quadratic reference weighs key j for query i by exp(G_j - G_i)",
    ),
    Mutant(
        "exact-no-temperature",
        "rfa/attention/exact.py",
        "k.astype(dtype)) / math.sqrt(q.shape[-1])",
        "k.astype(dtype))",
        ("tests/attention/test_exact.py",),
        "softmax attention without 1/√d",
    ),
    Mutant(
        "exact-causal-upper",
        "rfa/attention/exact.py",
        "        allowed = allowed & jnp.tril(jnp.ones(logits.shape[-2:], jnp.bool_))",
        "        allowed = allowed & jnp.triu(jnp.ones(logits.shape[-2:], jnp.bool_))",
        ("tests/attention/test_exact.py",),
        "exact causal attention sees the future",
    ),
    Mutant(
        "renormalize-divides-by-zero",
        "rfa/attention/common.py",
        "    safe = jnp.where(den == 0, 1.0, den)",
        "    safe = den",
        ("tests/attention",),
        "a query that sees no key outputs NaN",
    ),
    # Closed forms.
    Mutant(
        "calibration-ignores-padding",
        "rfa/attention/calibration.py",
        "    k, keep_k = _pooled(k, plan.keep_keys)",
        "    k, keep_k = _pooled(k, None)",
        ("tests/random_features/test_dense_exponential.py",),
        "calibration fits count padded keys",
    ),
    # Models.
    Mutant(
        "linformer-padding-projected",
        "rfa/attention/linformer.py",
        "        k, v = jnp.where(keep, k, 0), jnp.where(keep, v, 0)\n",
        "",
        ("tests/models/test_attention_kinds.py", "tests/attention/test_linformer.py"),
        "Linformer projects padded keys and values",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "naive-causal-mask-dropped",
        "rfa/attention/naive.py",
        "        allowed = allowed & jnp.tril(jnp.ones((q_len, kv_len), bool))\n",
        "        allowed = allowed\n",
        REFERENCE_TESTS,
        "the quadratic reference lets causal queries see the future",
    ),
    Mutant(
        "additive-mask-accepted",
        "rfa/attention/common.py",
        "        raise_if(jnp.any(mask < 0) | jnp.all(mask == 0), ADDITIVE_MASK)\n",
        "        pass\n",
        ("tests/attention/test_masks.py",),
        "a 0/-inf mask is read as nonzero = attend: it attends to the padding",
    ),
    # Fourier integral attention (issue 30).
    Mutant(
        "fourier-weights-unsigned",
        FOURIER,
        "    sign = jnp.prod(jnp.sign(safe), axis=-1)\n",
        "    sign = jnp.ones(safe.shape[:-1])\n",
        FOURIER_TESTS,
        "the weights' signs are dropped: |w| instead of w",
    ),
    Mutant(
        "fourier-radius-outside-the-sine",
        FOURIER,
        "    factors = jnp.sinc(radius * diff / jnp.pi)\n",
        "    factors = radius * jnp.sinc(diff / jnp.pi)\n",
        FOURIER_TESTS,
        "sin(δ)/δ scaled by R instead of sin(Rδ)/δ",
    ),
    Mutant(
        "fourier-causal-mask-dropped",
        FOURIER,
        "    if is_causal:\n        allowed = allowed & jnp.tril(",
        "    if False:\n        allowed = allowed & jnp.tril(",
        FOURIER_TESTS,
        "causal Fourier integral attention sees later keys",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "sub-chunk-decay-from-the-wrong-end",
        CHUNK_SCORES,
        "    query_log = jnp.cumsum(gs, axis=-2)  # [..., a, i, f]: Σ_{start(a)≤t≤i} g_t\n",
        "    query_log = jnp.flip(jnp.cumsum(jnp.flip(gs, -2), axis=-2), -2)\n",
        PER_FEATURE_TESTS,
        "below the diagonal, a query's decay is summed from its sub-chunk's end instead of its start",
    ),
    Mutant(
        "diagonal-sub-chunk-read-as-off-diagonal",
        CHUNK_SCORES,
        '    diagonal = contract("...aif,...ajf,...aijf->...aij", xs, ys, jnp.exp(diagonal_log), **mixed)\n',
        '    diagonal = contract("...aif,...ajf->...aij", queries, ys, **mixed) * causal[..., 0]\n',
        PER_FEATURE_TESTS,
        "a diagonal sub-chunk weighed as one below it: keys undecayed, queries decayed from the sub-chunk's start",
    ),
    Mutant(
        "window-off-by-one",
        "rfa/attention/sliding_window.py",
        "    inside = (distance >= 0) & (distance < window) if is_causal",
        "    inside = (distance >= 0) & (distance <= window) if is_causal",
        ("tests/attention/test_sliding_window.py",),
        "a causal window of w sees w + 1 keys",
    ),
    # Packed sequences (segment_ids): a state, a convolution and a window start fresh at a sequence's first token.
    Mutant(
        "packed-starts-ignore-padding",
        "rfa/attention/segments.py",
        "    return keep & (before >= 0) & (segment_ids != previous)",
        "    return keep & (segment_ids != jnp.concatenate([segment_ids[..., :1], segment_ids[..., :-1]], -1))",
        (PACKED_TESTS,),
        "a sequence starts after every padded token whose id differs, so padding inside a sequence splits it",
    ),
    Mutant(
        "packed-reset-leaks",
        "rfa/attention/segments.py",
        "RESET_LOG_DECAY = -1e6",
        "RESET_LOG_DECAY = -5.0",
        (PACKED_TESTS,),
        "the decay at a sequence's start is exp(-5), not 0: the state of the sequence before leaks into it",
    ),
    Mutant(
        "packed-window-reads-other-sequences",
        "rfa/attention/sliding_window.py",
        "        allowed = allowed & (query_ids == key_ids[..., None, :])",
        "        allowed = allowed & (query_ids == query_ids)",
        (PACKED_TESTS,),
        "the window attends across a sequence boundary",
    ),
    Mutant(
        "x64-constant-without-dtype",
        "rfa/attention/chunk_scores.py",
        "    log_weight = jnp.zeros((size, size), x.dtype) if log_decay is None",
        "    log_weight = jnp.zeros((size, size)) if log_decay is None",
        ("tests/models/test_float64.py",),
        "under jax.enable_x64 a float64 constant reaches DeltaNet's scan carry, which then changes type",
    ),
]
