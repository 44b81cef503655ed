"""Mutants of rfa/attention/delta_rule/: the recurrent and chunked forms, the API, the feature map.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant

DELTA_CHUNKED = "rfa/attention/delta_rule/chunked.py"
DELTA_RECURRENT = "rfa/attention/delta_rule/recurrent.py"
DELTA_API = "rfa/attention/delta_rule/api.py"
DELTA_TESTS = ("tests/attention/test_delta_rule.py",)

MUTANTS = [
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "delta-wy-solve-sign",
        DELTA_CHUNKED,
        "    system = beta[..., None] * decayed_scores(k, k, g, operands=operands)[0]",
        "    system = -beta[..., None] * decayed_scores(k, k, g, operands=operands)[0]",
        DELTA_TESTS,
        "a sign in the WY/UT solve: the chunk's errors add the earlier writes' overlap instead of removing it",
    ),
    Mutant(
        "kda-decay-after-the-erase",
        DELTA_RECURRENT,
        '        s = jnp.exp(g_t)[:, :, None] * s\n        error = v_t - jnp.einsum("rkv,rk->rv", s, k_t)\n'
        "        s = s + beta_t[:, None, None] * k_t[:, :, None] * error[:, None, :]\n",
        '        erase = beta_t[:, None, None] * k_t[:, :, None] * jnp.einsum("rkv,rk->rv", s, k_t)[:, None, :]\n'
        "        s = jnp.exp(g_t)[:, :, None] * (s - erase)"
        " + beta_t[:, None, None] * k_t[:, :, None] * v_t[:, None, :]\n",
        DELTA_TESTS,
        "KDA's decay applied after the erase, D (I - b k k^T) S: the same as before it for one decay per token only",
    ),
    Mutant(
        "kda-decay-collapsed-to-its-mean",
        DELTA_API,
        "        log_decay = rows(log_decay) if log_decay.ndim == q.ndim else token_rows(log_decay)\n",
        "        log_decay = token_rows(jnp.mean(log_decay, -1))"
        " if log_decay.ndim == q.ndim else token_rows(log_decay)\n",
        DELTA_TESTS,
        "the per-channel decay collapsed to its mean: KDA runs as Gated DeltaNet",
    ),
    Mutant(
        "solve-backward-untransposed",
        DELTA_CHUNKED,
        "    reversed_transpose = jnp.flip(jnp.swapaxes(lower, -1, -2), (-2, -1))\n",
        "    reversed_transpose = jnp.flip(lower, (-2, -1))\n",
        DELTA_TESTS,
        "the solve's gradient solves the reversed system, not the transposed one",
    ),
    Mutant(
        "delta-decay-after-write",
        DELTA_RECURRENT,
        '        s = jnp.exp(g_t)[:, :, None] * s\n        error = v_t - jnp.einsum("rkv,rk->rv", s, k_t)\n'
        "        s = s + beta_t[:, None, None] * k_t[:, :, None] * error[:, None, :]\n",
        '        error = v_t - jnp.einsum("rkv,rk->rv", s, k_t)\n'
        "        s = s + beta_t[:, None, None] * k_t[:, :, None] * error[:, None, :]\n"
        "        s = jnp.exp(g_t)[:, :, None] * s\n",
        DELTA_TESTS,
        "the recurrent form decays the state after the write, so a token's own write is decayed",
    ),
    Mutant(
        "delta-solve-reads-the-diagonal",
        DELTA_CHUNKED,
        "    if size == 1:\n        return rhs\n",
        "    if size == 1:\n        return rhs / (1 + lower)\n",
        DELTA_TESTS,
        "the triangular solve reads the diagonal of A: a token's own key counts as an earlier write",
    ),
    Mutant(
        "delta-solve-halves-independent",
        DELTA_CHUNKED,
        "    below = rhs[..., half:, :] - lower[..., half:, :half] @ top\n",
        "    below = rhs[..., half:, :]\n",
        DELTA_TESTS,
        "the solve by halves drops the top half's solution from the bottom half: later tokens miss earlier writes",
    ),
    Mutant(
        "delta-sequence-parallel-order",
        DELTA_API,
        "        return transition @ s + offset, s\n",
        "        return transition @ s + offset, transition @ s + offset\n",
        ("tests/attention/test_sequence_parallel.py",),
        "each device starts from the state after its own block instead of before it",
    ),
    Mutant(
        "delta-map-unnormalized",
        "rfa/attention/delta_rule/features.py",
        "        return phi / jnp.sqrt(jnp.sum(phi * phi, axis=-1, keepdims=True) + 1e-12)\n",
        "        return phi\n",
        DELTA_TESTS,
        "the kernelized delta rule writes keys of any norm (unstable)",
    ),
    Mutant(
        "delta-split-carry-not-varying",
        "rfa/attention/delta_rule/api.py",
        "    start = varying(start, axis)",
        "    start = start",
        ("tests/attention/test_sequence_parallel.py",),
        "inside shard_map with its default check_vma, the scans' carries change type and the call fails",
    ),
    Mutant(
        "delta-split-state-typed-per-device",
        "rfa/attention/delta_rule/api.py",
        "    return out, invariant(end, axis)",
        "    return out, end",
        ("tests/attention/test_sequence_parallel.py",),
        "the returned state is typed as varying, so shard_map refuses out_specs=P() for it",
    ),
    Mutant(
        "delta-rule-bfloat16-state",
        "rfa/attention/delta_rule/api.py",
        "    return q, k, v, beta, log_decay, state.astype(jnp.promote_types(dtype, state.dtype))",
        "    return q, k, v, beta, log_decay, state",
        ("tests/attention/test_precision.py",),
        "a bfloat16 state given to the delta rule is kept in bfloat16: decoding with decays near 1 drifts 20% off",
    ),
    Mutant(
        "delta-rule-chunk-operands-ignored",
        "rfa/attention/delta_rule/chunked.py",
        "        return contract(spec, a, b, operands=operands)",
        "        return contract(spec, a, b, operands=jnp.bfloat16)",
        ("tests/attention/test_delta_rule.py",),
        "the chunk's matmuls take bfloat16 operands whatever compute_dtype says (float32 runs lose their digits)",
    ),
]
