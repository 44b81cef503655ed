"""Mutation testing: apply small deliberate bugs to the library one at a time and see a test fail.

Each :class:`Mutant` replaces one exact snippet of one file (it must occur exactly once) and names
the tests that must catch it. The runner copies the repository (tracked and untracked, not ignored
files) to a scratch directory once, applies each mutant there in turn, runs its tests with
``python -m pytest -x``, restores the file, and writes a report: a mutant is *killed* when its tests
fail and *survives* when they pass. Every listed mutant must be killed; a survivor means a test is
missing. Grow the list with every feature (tests/test_mutants.py checks that every snippet is
still in its file, so the list cannot silently go stale).

Run: ``python tools/mutants.py`` (all, ~40 min on 2 cores), ``--only id1,id2`` for some,
``--report tools/mutants_report.md`` for where the report goes (default).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One deliberate bug: in ``path``, ``original`` (occurring once) becomes ``mutated``; ``tests`` must fail."""

    id: str
    path: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    why: str


PREPARE = "rfa/attention/kernelized/prepare.py"
BIDIRECTIONAL = "rfa/attention/kernelized/bidirectional.py"
CAUSAL = "rfa/attention/kernelized/causal.py"
API = "rfa/attention/kernelized/api.py"
SEQUENCE_PARALLEL = "rfa/attention/kernelized/sequence_parallel.py"
SOFTMAX = "rfa/random_features/estimators/softmax.py"
REFERENCE_TESTS = ("tests/attention/test_against_references.py",)
FOURIER = "rfa/attention/fourier_integral.py"
RELATIVE = "rfa/attention/kernelized/relative.py"
MULTIPROCESS = (
    "tests/train/test_multiprocess.py::test_processes_read_their_rows_stop_together_and_resume_on_other_process_counts"
)
RELATIVE_TESTS = ("tests/attention/test_relative_bias.py",)
PROCESS_ROWS_TEST = (
    "tests/data/test_data.py::test_processes_build_the_global_batches_of_one_process_each_reading_its_rows"
)
FOURIER_TESTS = ("tests/attention/test_fourier_integral.py",)
LONGER_TEST = "tests/train/test_train.py::test_a_trained_model_is_rebuilt_for_longer_sequences_and_evaluated_on_them"
ESTIMATORS_IN_MODELS = "rfa/experiments/studies/estimators_in_models/measure.py"
ESTIMATORS_TESTS = "tests/experiments/test_estimators_in_models.py"
DELTA_CHUNKED = "rfa/attention/delta_rule/chunked.py"
CHUNK_SCORES = "rfa/attention/chunk_scores.py"
PACKED_TESTS = "tests/attention/test_packed_sequences.py"
PER_FEATURE_TESTS = ("tests/attention/test_per_feature_decay.py",)
DELTA_RECURRENT = "rfa/attention/delta_rule/recurrent.py"
DELTA_API = "rfa/attention/delta_rule/api.py"
DELTA_TESTS = ("tests/attention/test_delta_rule.py",)
HYBRID_TESTS = "tests/models/test_delta_window_hybrid.py"

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "key-gradient-cut",
        BIDIRECTIONAL,
        "    phi_k = features_at(base_k, log_k, ref - key_log_mask)\n",
        "    phi_k = jax.lax.stop_gradient(features_at(base_k, log_k, ref - key_log_mask))\n",
        REFERENCE_TESTS,
        "bidirectional attention passes no gradient to the keys",
    ),
    Mutant(
        "oprf-statistic-gradient",
        SOFTMAX,
        "    return jax.lax.stop_gradient(phi)\n",
        "    return phi\n",
        REFERENCE_TESTS,
        "OPRF's data statistic carries a gradient",
    ),
    Mutant(
        "causal-mask-dropped",
        CAUSAL,
        "    key_log_mask = to_chunks(r.key_log_mask, chunk, -jnp.inf)\n",
        "    key_log_mask = to_chunks(jnp.zeros_like(r.key_log_mask), chunk, -jnp.inf)\n",
        REFERENCE_TESTS,
        "causal attention ignores key padding",
    ),
    Mutant(
        "rotary-not-relative",
        "rfa/models/positional.py",
        "    angle = positions[..., None, None].astype(jnp.float32) * rate",
        "    angle = positions[..., None, None].astype(jnp.float32) ** 2 * rate",
        ("tests/models/test_positional.py",),
        "rotary angle grows with position², scores stop being relative",
    ),
    Mutant(
        "relu-map-wrong",
        "rfa/random_features/estimators/deterministic.py",
        "    return no_log(jax.nn.relu(project(x, W)) + epsilon)",
        "    return no_log(jax.nn.relu(-project(x, W)) + 0.5)",
        ("tests/random_features/test_feature_maps.py",),
        "relu features of -Wx, offset 0.5",
    ),
    Mutant(
        "output-underflows",
        BIDIRECTIONAL,
        "    return jnp.maximum(ref, LOWEST)\n",
        "    return jnp.maximum(ref, LOWEST) + 90.0\n",
        ("tests/attention/test_kernelized.py::test_inputs_with_norm_10_in_low_precision_equal_the_reference",),
        "keys divided by e^90 too many: large-norm outputs underflow",
    ),
    Mutant(
        "low-precision-arithmetic",
        PREPARE,
        "    q = q.astype(jnp.float32)\n    k = k.astype(jnp.float32)\n",
        "",
        ("tests/attention/test_kernelized.py::test_inputs_with_norm_10_in_low_precision_equal_the_reference",),
        "bfloat16/float16 inputs computed in their own precision",
    ),
    Mutant(
        "builder-unseeded",
        "rfa/data/algorithmic.py",
        "        rng = np.random.default_rng([zlib.crc32(config.name.encode()), zlib.crc32(split.encode())])",
        "        rng = np.random.default_rng()",
        ("tests/data/test_golden.py",),
        "a dataset generated from an unseeded generator",
    ),
    Mutant(
        "label-smoothing-halved",
        "rfa/tasks/common.py",
        "jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing)",
        "jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing / 2)",
        ("tests/train/test_steps.py",),
        "label smoothing with half the configured mass",
    ),
    Mutant(
        "sequence-accuracy-counts-empty-rows",
        "rfa/tasks/seq2seq.py",
        "        present = weights.any(-1)\n",
        "        present = jnp.ones(weights.shape[:-1], bool)\n",
        ("tests/train/test_steps.py",),
        "all-padding rows count as sequences",
    ),
    Mutant(
        "write-not-atomic",
        "rfa/workdir.py",
        '        with open(tmp, "w") as f:\n            f.write(text)\n        os.replace(tmp, path)\n',
        '        with open(path, "w") as f:\n            f.write(text)\n',
        ("tests/experiments/test_sweep.py",),
        "results written in place: a kill leaves half a file",
    ),
    # Masks (issue 13).
    Mutant(
        "causal-mask-read-as-padding",
        "rfa/attention/masks.py",
        "            return MaskPlan(keep_keys, keep_queries, CAUSAL)",
        "            return MaskPlan(keep_keys, keep_queries, PADDING)",
        ("tests/attention/test_masks.py",),
        "a concrete causal mask runs bidirectional attention",
    ),
    Mutant(
        "traced-mask-branches-swapped",
        API,
        "    branches = [modes[p] if ok else unsupported",
        "    branches = [modes[1 - p] if ok else unsupported",
        ("tests/attention/test_masks.py",),
        "under jit a causal mask selects the bidirectional form",
    ),
    Mutant(
        "padded-queries-not-zeroed",
        PREPARE,
        "        q32 = jnp.where(keep_q, q32, 0.0)\n",
        "        q32 = q32 + 0.0\n",
        ("tests/attention/test_masks.py",),
        "NaN in a padded query reaches the gradients",
    ),
    Mutant(
        "padded-query-outputs-kept",
        PREPARE,
        "    if call.keep_queries is not None:\n        out = jnp.where(",
        "    if False:\n        out = jnp.where(",
        ("tests/attention/test_masks.py",),
        "padded queries output attention instead of 0",
    ),
    Mutant(
        "decode-fit-allowed",
        "rfa/attention/flax_adapter.py",
        "        if fitted and query.shape[-3] != key.shape[-3]:",
        "        if fitted and query.shape[-3] < 0:",
        ("tests/attention/test_flax_adapter.py",),
        "oprf fits phi_sq per decoding step of Flax's cache",
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
        "causal-state-not-rescaled",
        CAUSAL,
        "        state = state * jnp.exp(state_log[..., -1:, :] - chunk_ref) + kv\n",
        "        state = state + kv\n",
        ("tests/attention/test_kernelized.py", *REFERENCE_TESTS),
        "the carried state keeps its old stabilizer reference",
    ),
    Mutant(
        "causal-state-read-unscaled",
        CAUSAL,
        "phi_q_c, state, precision=precision) * jnp.exp(state_log - ref)\n",
        "phi_q_c, state, precision=precision)\n",
        REFERENCE_TESTS,
        "queries read the carried state without its decay and reference",
    ),
    Mutant(
        "causal-new-keys-at-the-query-reference",
        CAUSAL,
        "v_c * jnp.exp(to_end_c - chunk_ref), phi_k_c",
        "v_c * jnp.exp(to_end_c - ref), phi_k_c",
        REFERENCE_TESTS,
        "a chunk's keys enter the state at each query's reference, not the chunk's last",
    ),
    Mutant(
        "state-read-at-its-own-scale",
        BIDIRECTIONAL,
        "        kv = kv + initial[0] * jnp.exp(initial[1] - ref)\n",
        "        kv = kv + initial[0]\n",
        ("tests/attention/test_decay_and_state.py",),
        "a bidirectional call adds its initial state without moving it to the keys' reference",
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
        "state-not-decayed-inside-a-chunk",
        CAUSAL,
        "jnp.cumsum(log_decay, axis=-2), s_k + later_sums(log_decay)",
        "jnp.sum(log_decay, axis=-2, keepdims=True), s_k + later_sums(log_decay)",
        REFERENCE_TESTS,
        "queries read the carried state decayed by the whole chunk",
    ),
    Mutant(
        "padded-tokens-decay",
        PREPARE,
        "            log_decay = jnp.where(keep_k, log_decay, 0.0)\n",
        "            log_decay = log_decay + 0.0\n",
        ("tests/attention/test_decay_and_state.py", *REFERENCE_TESTS),
        "a left-out token still decays the state",
    ),
    Mutant(
        "decay-without-gradient",
        PREPARE,
        "        log_decay = jnp.swapaxes(jnp.broadcast_to(log_decay, call.k.shape[:-1]), -1, -2)[..., None]\n",
        "        log_decay = jax.lax.stop_gradient(\n"
        "            jnp.swapaxes(jnp.broadcast_to(log_decay, call.k.shape[:-1]), -1, -2)[..., None])\n",
        REFERENCE_TESTS,
        "no gradient reaches log_decay",
    ),
    Mutant(
        "sequence-prefix-decays-too-far",
        SEQUENCE_PARALLEL,
        "(jnp.arange(size)[None, :] < end)",
        "(jnp.arange(size)[None, :] <= end)",
        ("tests/attention/test_sequence_parallel.py",),
        "a device's prefix state is also decayed by its own block",
    ),
    Mutant(
        "sequence-states-summed-at-own-scales",
        SEQUENCE_PARALLEL,
        "    kv = jax.lax.psum(local.kv * jnp.exp(local.log_reference - ref)[..., None, None], axis)",
        "    kv = jax.lax.psum(local.kv, axis)",
        ("tests/attention/test_sequence_parallel.py",),
        "the devices' bidirectional states are added without a common reference",
    ),
    Mutant(
        "sequence-token-params-replicated",
        API,
        "            return spec(*([None] * (ndim - 1 - event)), axis)\n",
        "            return spec()\n",
        ("tests/train/test_sequence_sharded_training.py",),
        "per-token map parameters (gated RFA's key weights) reach every device whole, not split with the tokens",
    ),
    Mutant(
        "model-never-splits-the-sequence",
        "rfa/attention/kernelized/api.py",
        "    if sequence_axis is not None and sequence_axis in mesh.axis_names and mesh.shape[sequence_axis] > 1:\n",
        "    if False:\n",
        (
            "tests/train/test_sequence_sharded_training.py",
            "tests/attention/test_sequence_parallel.py::test_the_nnx_layer_with_a_sequence_axis_splits_the_sequence_under_set_mesh",
        ),
        "kernelized sites and layers ignore the mesh's sequence axis (XLA splits them its own way)",
    ),
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
        "series-normalised-by-its-own-split",
        "rfa/data/series.py",
        "        mean, std = normalization(train_values)\n",
        "        mean, std = normalization(split_values)\n",
        ("tests/data/test_series.py",),
        "evaluation windows normalised with statistics of the future",
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
        "gate-dropped-in-training",
        "rfa/models/cores.py",
        "options = self._options(x if self.causal else None)",
        "options = self._options(None)",
        ("tests/models/test_attention_kinds.py",),
        "a gated site trains and teacher-forces without its gate",
    ),
    Mutant(
        "exact-no-temperature",
        "rfa/attention/exact.py",
        "k.astype(jnp.float32)) / math.sqrt(q.shape[-1])",
        "k.astype(jnp.float32))",
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
    # Feature maps and projections.
    Mutant(
        "hyperbolic-normalization",
        SOFTMAX,
        "- 0.5 * math.log(2 * W.shape[0])",
        "- 0.5 * math.log(W.shape[0])",
        ("tests/random_features/test_feature_maps.py",),
        "hyperbolic features scaled by m^{-1/2} instead of (2m)^{-1/2}",
    ),
    Mutant(
        "gerf-coefficient",
        SOFTMAX,
        "    b = jnp.sqrt(1.0 - 4.0 * A)",
        "    b = 1.0 - 4.0 * A",
        ("tests/random_features/test_feature_maps.py",),
        "GERF's √(1-4A) coefficient dropped to 1-4A",
    ),
    Mutant(
        "optimal-a-constant",
        "rfa/random_features/closed_forms.py",
        "jnp.sqrt((2.0 * rho + 1.0) ** 2 + 8.0 * rho)) / 16.0",
        "jnp.sqrt((2.0 * rho + 1.0) ** 2 + 8.0 * rho)) / 8.0",
        ("tests/random_features",),
        "OPRF's A* with 1/8, the misprint of a third-party summary",
    ),
    Mutant(
        "trig-cos-twice",
        SOFTMAX,
        "    return jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(W.shape[0]), half_sq_norm(x)",
        "    return jnp.concatenate([jnp.cos(wx), jnp.cos(wx)], axis=-1) / math.sqrt(W.shape[0]), half_sq_norm(x)",
        ("tests/random_features/test_feature_maps.py",),
        "trig features [cos, cos]",
    ),
    Mutant(
        "orthogonal-blocks-repeat",
        "rfa/random_features/projections.py",
        "    gaussian = jax.random.normal(key, (num_blocks, dim, dim), jnp.float32)",
        "    gaussian = jnp.repeat(jax.random.normal(key, (1, dim, dim), jnp.float32), num_blocks, axis=0)",
        ("tests/random_features/test_projections.py",),
        "every orthogonal block is the same block",
    ),
    Mutant(
        "orthogonal-unit-norms",
        "rfa/random_features/projections.py",
        "        norms = jnp.linalg.norm(jax.random.normal(norm_key, (num_features, dim), jnp.float32), axis=-1)",
        "        norms = jnp.ones((num_features,), jnp.float32)",
        ("tests/random_features/test_projections.py",),
        "orthogonal rows of norm 1, not chi(d)",
    ),
    Mutant(
        "simplex-not-rotated",
        "rfa/random_features/projections.py",
        "            blocks = jnp.asarray(directions(dim), jnp.float32) @ blocks",
        "            blocks = jnp.broadcast_to(jnp.asarray(directions(dim), jnp.float32), blocks.shape)",
        ("tests/random_features/test_projections.py",),
        "simplex rows without their Haar rotation",
    ),
    Mutant(
        "lapack-batched-on-cpu",
        "rfa/random_features/lapack.py",
        "cpu=lambda x: jax.lax.map(decomposition, x)",
        "cpu=decomposition",
        (
            "tests/random_features/test_projections.py::test_decompositions_run_at_once_do_not_deadlock_the_cpu_thread_pool",
        ),
        "on CPU a batch of QRs or eighs is one LAPACK call again, and two at once can deadlock XLA's thread pool",
    ),
    Mutant(
        "lapack-batch-reordered",
        "rfa/random_features/lapack.py",
        "cpu=lambda x: jax.lax.map(decomposition, x)",
        "cpu=lambda x: jax.lax.map(decomposition, x[::-1])",
        ("tests/random_features/test_dense_exponential.py",),
        "on CPU each head's DERF fit comes from another head's moments",
    ),
    # Closed forms.
    Mutant(
        "trig-mse-factor",
        SOFTMAX,
        "    return s.x_sq + s.y_sq + 2.0 * log_one_minus_exp(s.delta_sq) - math.log(2.0) - math.log(num_features)",
        "    return s.x_sq + s.y_sq + 2.0 * log_one_minus_exp(s.delta_sq) - math.log(num_features)",
        ("tests/random_features/test_theory.py",),
        "trig MSE 1/m instead of 1/(2m)",
    ),
    Mutant(
        "hyperbolic-mse-factor",
        SOFTMAX,
        "    return log_var - math.log(num_features) + log_one_minus_exp(s.z_sq) - math.log(2.0)",
        "    return log_var - math.log(num_features) - math.log(2.0)",
        ("tests/random_features/test_theory.py",),
        "hyperbolic MSE without (1 - e^{-|z|²})",
    ),
    Mutant(
        "hybrid-weights-reversed",
        "rfa/random_features/estimators/hybrid.py",
        'positive_weights = side_indicators(x, angular, swapped=side == "key")',
        "positive_weights = side_indicators(x, angular, swapped=False)",
        ("tests/random_features/test_hybrid.py",),
        "λ̂ weights the trig estimator (the reversed public notebook)",
    ),
    Mutant(
        "hybrid-covariance-dropped",
        "rfa/random_features/estimators/hybrid.py",
        "        ratio = jnp.exp(jnp.log(weight) + log_minus_cov",
        "        ratio = 0.0 * jnp.exp(jnp.log(weight) + log_minus_cov",
        ("tests/random_features/test_hybrid.py",),
        "HRF's MSE without the covariance of its two bases",
    ),
    Mutant(
        "aderf-wrong-root",
        "rfa/random_features/estimators/dense_exponential.py",
        "    query_transform = _mm(_power(c, 0.25), _power(m1, -0.5))",
        "    query_transform = _mm(_power(c, 0.5), _power(m1, -0.5))",
        ("tests/random_features/test_dense_exponential.py",),
        "ADERF's M = C^{1/2} M₁^{-1/2}: MᵀM is not K",
    ),
    Mutant(
        "derf-fit-gradient",
        "rfa/random_features/estimators/dense_exponential.py",
        "    q, k = jax.lax.stop_gradient(q), jax.lax.stop_gradient(k)\n",
        "",
        ("tests/attention/test_against_references.py",),
        "DERF's fitted parameters carry a gradient",
    ),
    Mutant(
        "derf-fit-sees-padding",
        "rfa/random_features/estimators/dense_exponential.py",
        "        M1, M2 = _second_moment(q, keep_q), _second_moment(k, keep_k)",
        "        M1, M2 = _second_moment(q, None), _second_moment(k, None)",
        ("tests/random_features/test_dense_exponential.py",),
        "DERF's second moments count padded tokens",
    ),
    Mutant(
        "derf-moments-linear",
        "rfa/random_features/estimators/dense_exponential.py",
        "+ k**2 * (1 - 4 * a) * z_sq / (2 * one_minus)",
        "+ k * (1 - 4 * a) * z_sq / (2 * one_minus)",
        ("tests/random_features/test_dense_exponential.py",),
        "DERF's k-th moment with k instead of k²",
    ),
    Mutant(
        "calibration-ignores-padding",
        "rfa/attention/calibration.py",
        "    k, keep_k = _pooled(k, plan.keep_keys)",
        "    k, keep_k = _pooled(k, None)",
        ("tests/random_features/test_dense_exponential.py",),
        "calibration fits count padded keys",
    ),
    Mutant(
        "derf-moments-not-strided",
        "rfa/random_features/estimators/dense_exponential.py",
        "    stride = -(-x.shape[-2] // MOMENT_TOKENS)",
        "    stride = 1",
        ("tests/random_features/test_dense_exponential.py",),
        "long sequences' second moments from every token",
    ),
    Mutant(
        "sderf-rho-halved",
        "rfa/random_features/estimators/dense_exponential.py",
        "    A = optimal_gerf_parameter(jnp.maximum(values, 0.0), 1)",
        "    A = optimal_gerf_parameter(jnp.maximum(values, 0.0) / 2, 1)",
        ("tests/random_features/test_dense_exponential.py",),
        "SDERF's A at half of each eigenvalue",
    ),
    Mutant(
        "simplex-cosine",
        "rfa/random_features/closed_forms.py",
        '    return -1.0 / (dim - 1) if projection_kind == "simplex" else 0.0',
        '    return -0.5 / (dim - 1) if projection_kind == "simplex" else 0.0',
        ("tests/random_features/test_theory.py",),
        "simplex closed form with half the rows' negative cosine",
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
        "rfa/models/cores.py",
        "return self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions, return_state",
        "return self(q, k, v, x, key_mask=key_mask | True, q_positions=positions, k_positions=positions, return_state",
        (
            "tests/models/test_models.py::test_greedy_generation_after_a_prefilled_prompt_picks_the_argmax_of_teacher_forcing",
        ),
        "a prefilled prompt's padding enters the kernelized state",
    ),
    Mutant(
        "cross-rotary-always",
        "rfa/models/attention.py",
        'self.rotary = config.positional == "rotary" and (not cross or config.cross_attention_rotary)',
        'self.rotary = config.positional == "rotary"',
        ("tests/models/test_models.py::test_rotary_positions_at_cross_attention_are_a_per_site_flag",),
        "cross-attention rotated although cross_attention_rotary is off",
    ),
    Mutant(
        "gate-forgotten-when-decoding",
        "rfa/models/cores.py",
        "            return_state=True,\n            **self._options(x),",
        "            return_state=True,\n            **self._options(),",
        ("tests/models/test_attention_kinds.py",),
        "decoding a gated model ignores the gate",
    ),
    Mutant(
        "gate-input-weight-dropped",
        "rfa/models/cores.py",
        '            if "key_log_weight" in self.estimator.names():',
        "            if False:",
        ("tests/models/test_attention_kinds.py", "tests/train"),
        "gated RFA without the (1 - g) weight of new keys",
    ),
    Mutant(
        "linformer-padding-projected",
        "rfa/attention/linformer.py",
        "        k, v = jnp.where(keep, k, 0), jnp.where(keep, v, 0)\n",
        "",
        ("tests/models/test_attention_kinds.py", "tests/attention/test_linformer.py"),
        "Linformer projects padded keys and values",
    ),
    Mutant(
        "kv-cache-float32",
        "rfa/models/softmax.py",
        '"k": jnp.zeros(shape, self.dtype),\n            "v": jnp.zeros(shape, self.dtype),',
        '"k": jnp.zeros(shape, jnp.float32),\n            "v": jnp.zeros(shape, jnp.float32),',
        ("tests/models/test_models.py::test_low_precision_decoding_equals_teacher_forcing",),
        "exact KV caches in float32 instead of the model's dtype",
    ),
    # Data.
    Mutant(
        "sort-descending",
        "rfa/data/algorithmic.py",
        '"sort": lambda s: "".join(sorted(s))',
        '"sort": lambda s: "".join(sorted(s, reverse=True))',
        ("tests/data",),
        "the sort task's targets sorted the wrong way",
    ),
    Mutant(
        "listops-median-mean",
        "rfa/data/listops.py",
        '    "[MED": lambda args: int(statistics.median(args)),',
        '    "[MED": lambda args: int(statistics.mean(args)),',
        ("tests/data",),
        "ListOps' MED computes the mean",
    ),
    # Training.
    Mutant(
        "teacher-forcing-without-bos",
        "rfa/tasks/seq2seq.py",
        "    return jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)",
        "    return jnp.concatenate([jnp.full_like(targets[:, :1], 0), targets[:, :-1]], axis=1)",
        ("tests/train/test_steps.py",),
        "the decoder's first input is padding, not BOS",
    ),
    Mutant(
        "inverse-sqrt-schedule",
        "rfa/train/optim.py",
        "jnp.minimum(step**-0.5, step * max(warmup, 1) ** -1.5)",
        "jnp.minimum(step**-0.5, step * max(warmup, 1) ** -1.0)",
        ("tests/train/test_train.py::test_schedules_follow_their_formulas",),
        "the paper's warmup with the wrong power",
    ),
    Mutant(
        "interrupt-drops-metric-sums",
        "rfa/train/loop.py",
        "                    checkpoints.save(done, state, saved_position(), metrics=window)",
        "                    checkpoints.save(done, state, saved_position())",
        ("tests/train/test_train.py",),
        "an interrupted run loses the sums of the steps since the last log",
    ),
    Mutant(
        "signal-handlers-not-restored",
        "rfa/train/loop.py",
        "            signal.signal(signum, handler)",
        "            pass",
        ("tests/train/test_train.py",),
        "training leaves its SIGINT/SIGTERM handlers installed",
    ),
    Mutant(
        "resume-loses-data-position",
        "rfa/train/loop.py",
        "    if position is not None:\n        try:",
        "    if False:\n        try:",
        ("tests/train/test_train.py",),
        "a resumed run starts the data stream from the beginning",
    ),
    Mutant(
        "fig2-verdict-ignores-published",
        "rfa/experiments/sweeps/performer_fig2.py",
        "    return abs(theory / published - 1) <= FIG2_TOLERANCE",
        "    return True",
        ("tests/experiments/test_runner.py",),
        "Performer Fig. 2 counted as reproduced whatever the ratio",
    ),
    # Runners.
    Mutant(
        "config-change-ignored",
        "rfa/workdir.py",
        "        if not is_execution(key) and old.get(key) != new.get(key)",
        "        if not is_execution(key) and old.get(key) != new.get(key) and False",
        ("tests/experiments/test_sweep.py",),
        "a workdir of another config is resumed as if it were the same",
    ),
    Mutant(
        "config-modules-not-imported",
        "rfa/workdir.py",
        "            importlib.import_module(name)",
        "            pass",
        ("tests/experiments/test_runner.py::test_a_users_estimators_run_from_a_module_named_in_the_config",),
        "the runner ignores config.modules: a user's estimator is unknown",
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
        "class-position-not-zero",
        "rfa/models/positional.py",
        "np.concatenate([np.zeros((leading, dim), np.float32), table])",
        "np.concatenate([table[:leading], table])",
        ("tests/models/test_positional.py",),
        "a fixed table gives the class token a patch's position",
    ),
    Mutant(
        "queries-keys-not-sown",
        "rfa/models/attention.py",
        '            self.sow(AttentionInputs, "inputs", (q, k, v, key_mask))',
        '            self.sow(AttentionInputs, "inputs", (k, q, v, key_mask))',
        ("tests/models/test_positional.py",),
        "captured queries and keys swapped",
    ),
    Mutant(
        "output-flag-ignored",
        "rfa/experiments/report.py",
        "    return output or os.path.join(workdir, name)",
        "    return os.path.join(workdir, name)",
        ("tests/experiments/test_benchmark_smoke.py",),
        "--output is ignored: results go to the workdir only",
    ),
    Mutant(
        "saved-projection-name-not-upgraded",
        "rfa/train/config.py",
        '        attention["projection_kind"] = attention.pop("projection")\n',
        '        attention["projection"] = attention.pop("projection")\n',
        ("tests/train/test_train.py::test_a_workdir_of_release_0_2_reads_back_in_todays_schema",),
        "a workdir of release 0.2 is refused as another config",
    ),
    Mutant(
        "feature-params-only-at-decoder-sites",
        "rfa/train/config.py",
        '    given = {name: float(value) for name, value in a["feature_params"]}\n',
        '    given = {name: float(value) for name, value in a["feature_params"] if site != "encoder"}\n',
        ("tests/train/test_train.py::test_a_fixed_feature_param_reaches_every_site",),
        "config.attention.feature_params is ignored at encoder sites",
    ),
    Mutant(
        "renamed-study-config-not-found",
        "rfa/experiments/cli.py",
        "    module = configs.find(configs.RENAMED.get(stem, stem))\n",
        "    module = configs.find(stem)\n",
        ("tests/experiments/test_sweep.py::test_shipped_configs_are_found_by_name_where_no_such_file_exists",),
        "--config distill (0.2's name) is not found",
    ),
    Mutant(
        "shipped-configs-not-found",
        "rfa/experiments/cli.py",
        "    return value if shipped is None else shipped + colon + arg\n",
        "    return value\n",
        ("tests/experiments/test_sweep.py::test_shipped_configs_are_found_by_name_where_no_such_file_exists",),
        "--config <name> works only where a file of that name is",
    ),
    Mutant(
        "reproduction-requirements-ignored",
        "rfa/experiments/sweeps/registry.py",
        "    if missing:\n",
        "    if False:\n",
        ("tests/experiments/test_runner.py",),
        "a sweep lacking what its comparison needs gets its verdict",
    ),
    Mutant(
        "decode-step-forgets-the-state",
        "rfa/attention/flax_cache.py",
        "    return attend(q, k, v, mask=mask, is_causal=True, initial_state=state, return_state=True)\n",
        "    return attend(q, k, v, mask=mask, is_causal=True, initial_state=None, return_state=True)\n",
        ("tests/attention/test_flax_layers.py",),
        "a decoding step of the Flax layers ignores the tokens before it",
    ),
    Mutant(
        "cross-attention-recomputed-every-step",
        "rfa/attention/flax_cache.py",
        "    return jax.lax.cond(ready, later, first, q, k, v, state)\n",
        "    return jax.lax.cond(False, later, first, q, k, v, state)\n",
        ("tests/attention/test_flax_layers.py",),
        "decoding cross-attention reads the encoder's keys every token",
    ),
    Mutant(
        "nnx-layer-shifts-the-weights",
        "rfa/attention/map_variables.py",
        "    return jax.random.fold_in(jax.random.fold_in(stream.key[...], stream.count[...]), 0x5EED)\n",
        "    return rngs.params()\n",
        ("tests/attention/test_flax_layers.py",),
        "drawing W advances the params stream: the model's later weights differ from Flax's",
    ),
    Mutant(
        "linen-redraw-ignored",
        "rfa/linen.py",
        "                variable.value = drawn[name]\n",
        "                pass\n",
        ("tests/attention/test_flax_layers.py",),
        "Linen apply with a random_features rng keeps the old W",
    ),
    Mutant(
        "kv-heads-tiled",
        "rfa/attention/flax_adapter.py",
        "    return tuple(jnp.repeat(x, heads // kv_heads, axis=-2) for x in (key, value))\n",
        "    return tuple(jnp.tile(x, (1,) * (x.ndim - 2) + (heads // kv_heads, 1)) for x in (key, value))\n",
        ("tests/attention/test_flax_layers.py",),
        "grouped-query heads paired with the wrong key/value heads",
    ),
    Mutant(
        "traced-mask-check-dropped",
        "rfa/attention/kernelized/api.py",
        "    raise_if(~jnp.asarray(runnable)[plan.pattern], message, values=(plan.pattern, found))\n",
        "",
        ("tests/attention/test_masks.py",),
        "an unsupported traced mask returns NaN without a word",
    ),
    Mutant(
        "positive-decay-accepted-under-jit",
        "rfa/attention/kernelized/prepare.py",
        "        log_decay > 0,\n",
        "        log_decay > 1e30,\n",
        ("tests/test_checks.py",),
        "a traced positive log_decay grows the state silently",
    ),
    Mutant(
        "additive-mask-accepted",
        "rfa/attention/common.py",
        "        raise_if(jnp.any(mask < 0) | jnp.all(mask == 0), ADDITIVE_MASK)\n",
        "        pass\n",
        ("tests/attention/test_masks.py",),
        "a 0/-inf mask is read as nonzero = attend: it attends to the padding",
    ),
    Mutant(
        "run-time-check-silent",
        "rfa/checks.py",
        "        jax.debug.callback(report, failed, *values, partitioned=True)\n",
        "        pass\n",
        ("tests/test_checks.py",),
        "raise_if never raises under jit",
    ),
    Mutant(
        "run-time-check-on-one-device",
        "rfa/checks.py",
        "        jax.debug.callback(report, failed, *values, partitioned=True)\n",
        "        jax.debug.callback(report, failed, *values)\n",
        (
            "tests/attention/test_sequence_parallel.py::"
            "test_a_traced_mask_the_layer_cannot_apply_raises_its_eager_error_on_8_devices",
        ),
        "a failed check stops one device of eight; the others wait at a collective until XLA aborts the process",
    ),
    Mutant(
        "check-host-side-dispatches-jax",
        "rfa/checks.py",
        "        if np.asarray(failed).any():\n",
        "        if np.any(failed):\n",
        ("tests/test_checks.py::test_jitted_checked_calls_beside_eager_ops_do_not_freeze",),
        "the callback calls the jax.Array's .any(), a JAX dispatch from XLA's callback thread: loops freeze on 2 cores",
    ),
    Mutant(
        "check-failure-logged",
        "rfa/checks.py",
        "        return not getattr(error, _CHECK_FAILURE, False)\n",
        "        return True\n",
        ("tests/test_checks.py::test_a_caught_check_error_prints_nothing",),
        "a caught check error prints JAX's traceback to stderr",
    ),
    Mutant(
        "checks-switch-ignored",
        "rfa/checks.py",
        "    if _VALUE_CHECKS.value:\n",
        "    if True:\n",
        (
            "tests/test_checks.py::test_the_switch_turns_the_checks_of_values_off_eagerly_and_under_jit_and_keeps_shape_checks",
        ),
        "rfa.checks.enabled(False) checks all the same",
    ),
    Mutant(
        "model-cores-checked",
        "rfa/checks.py",
        "    with enabled(False):\n        return fn(*args, **kwargs)\n",
        "    return fn(*args, **kwargs)\n",
        ("tests/models/test_no_host_calls.py",),
        "every decoded token of a gated kind makes host calls for values in range by construction",
    ),
    Mutant(
        "nan-checks-never-on",
        "rfa/checks.py",
        "    if not _NAN_CHECKS.value:\n        return\n",
        "    return\n",
        ("tests/test_checks.py",),
        "nan_checks() checks nothing",
    ),
    Mutant(
        "forecaster-accepts-nan",
        "rfa/models/forecaster.py",
        "            ~jnp.all(jnp.isfinite(x)),\n",
        "            False,\n",
        ("tests/test_checks.py",),
        "NaN series reach the forecaster's output",
    ),
    Mutant(
        "set-mesh-inputs-not-sharded",
        "rfa/attention/kernelized/api.py",
        "            lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s) if given_mesh else s), value\n",
        "            lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s)) if given_mesh else x, value\n",
        ("tests/attention/test_sequence_parallel.py",),
        "under jax.set_mesh unsharded inputs hit shard_map's error",
    ),
    Mutant(
        "config-typo-traceback",
        "rfa/experiments/cli.py",
        '        sys.exit(f"error: {override_error(argv, error)}")\n',
        "        raise\n",
        ("tests/train/test_commands.py::test_entry_points_report_bad_input_without_a_traceback",),
        "a typo in a --config override prints a traceback",
    ),
    Mutant(
        "lookback-error-unnamed",
        "rfa/tasks/forecast.py",
        "        if max_length + horizon > len(values):\n",
        "        if False:\n",
        ("tests/train/test_commands.py::test_entry_points_report_bad_input_without_a_traceback",),
        "a lookback longer than the series fails without naming config.max_length and config.model.horizon",
    ),
    Mutant(
        "results-printed-by-every-process",
        "rfa/experiments/train.py",
        "    if jax.process_index() == 0:  # one copy of the results, however many processes\n",
        "    if True:  # one copy of the results, however many processes\n",
        (MULTIPROCESS,),
        "every process prints the results",
    ),
    Mutant(
        "data-rows-duplicated-across-processes",
        "rfa/data/pipeline.py",
        "        self.offset = shard[0] * self.rows\n",
        "        self.offset = 0\n",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "process 1 reads process 0's rows: half the batch, twice",
    ),
    Mutant(
        "every-process-reads-every-row",
        "rfa/data/pipeline.py",
        "    if not rows_are_examples:\n        read = _counted(",
        "    if True:\n        read = _counted(",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "every process reads and tokenizes the whole global batch and keeps its block (the input work of one "
        "process, on every process)",
    ),
    Mutant(
        "data-position-not-moved-to-the-new-process-count",
        "rfa/data/pipeline.py",
        '    return {**position, "next_index": position["next_index"] // count}\n',
        "    return position\n",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "a run resumed on another number of processes starts its data at the wrong batch",
    ),
    Mutant(
        "rows-of-other-processes-left-in-the-batch",
        "rfa/data/pipeline.py",
        "value[index * rows : (index + 1) * rows] for key",
        "value[:rows] for key",
        (PROCESS_ROWS_TEST,),
        "where every process reads the whole batch (sort), process 1 keeps process 0's block",
    ),
    Mutant(
        "state-put-on-unaddressable-devices",
        "rfa/train/sharding.py",
        "    if jax.process_count() == 1:\n        return jax.device_put(tree, shardings)\n",
        "    if True:\n        return jax.device_put(tree, shardings)\n",
        (MULTIPROCESS,),
        "device_put to a mesh spanning processes: the launch fails at once (the original bug)",
    ),
    Mutant(
        "processes-stop-apart",
        "rfa/train/loop.py",
        "    if jax.process_count() == 1:\n        return received[0] if received else None\n",
        "    if True:\n        return received[0] if received else None\n",
        (MULTIPROCESS,),
        "SIGTERM stops only the process that got it; the other waits at the next collective",
    ),
    Mutant(
        "coordinator-not-probed",
        "rfa/train/sharding.py",
        '        if options["process_id"] != 0:  # JAX aborts',
        "        if False:  # JAX aborts",
        (
            "tests/train/test_multiprocess.py::test_a_process_that_cannot_reach_the_coordinator_fails_in_one_line_within_the_timeout",
        ),
        "a process with no coordinator dies in a C++ abort instead of one line",
    ),
    # Evidence that discriminates (issue 29).
    Mutant(
        "test-split-is-validation",
        "rfa/train/loop.py",
        "        test = evaluate(eval_step, state, task, config, mesh, task.test_split)",
        "        test = evaluate(eval_step, state, task, config, mesh, task.validation_split)",
        (
            "tests/train/test_train.py::test_validation_is_evaluated_while_training_and_test_once_on_the_final_checkpoint",
        ),
        "results.json's test metrics are the validation split's",
    ),
    Mutant(
        "population-standard-deviation",
        "rfa/experiments/spread.py",
        "values.std(ddof=1)",
        "values.std(ddof=0)",
        ("tests/experiments/test_spread.py",),
        "the spread over seeds divides by n instead of n - 1",
    ),
    # Evidence that holds up (issue 40).
    Mutant(
        "verdicts-without-holm",
        "rfa/experiments/spread.py",
        "        if p > alpha / (len(tested) - rank):\n",
        "        if p > alpha:\n",
        ("tests/experiments/test_spread.py", "tests/test_results_pages.py"),
        "a table's comparisons are not corrected for their number",
    ),
    Mutant(
        "verdicts-unpaired",
        "rfa/experiments/spread.py",
        "        if set(values) <= set(reference):\n",
        "        if False:\n",
        ("tests/experiments/test_spread.py", "tests/test_results_pages.py"),
        "runs that share seeds are compared as if they did not (Welch)",
    ),
    Mutant(
        "normal-quantile",
        "rfa/experiments/spread.py",
        "    half = float(stats.t.ppf(0.5 + LEVEL / 2, dof)) * error\n",
        "    half = 1.96 * error\n",
        ("tests/experiments/test_spread.py",),
        "the 95% interval takes the normal quantile whatever the seeds",
    ),
    Mutant(
        "results-json-number-changed",
        "results/recall_cpu.json",
        '"accuracy": 0.09275',
        '"accuracy": 0.19275',
        ("tests/test_results_pages.py",),
        "one per-seed accuracy of a committed results file is changed",
    ),
    # Claims everywhere (issue 57).
    Mutant(
        "stale-table",
        "results/benchmark_decoding_cpu.json",
        '"128": 2.50465937412514e-05',
        '"128": 3.50465937412514e-05',
        ("tests/test_results_pages.py",),
        "one number of a committed benchmark JSON is changed: the page's decoding table no longer shows its data",
    ),
    Mutant(
        "stale-cost-column",
        "results/benchmark_train_step_cpu.json",
        '"hedgehog_m64": 0.1366635030026373',
        '"hedgehog_m64": 0.1966635030026373',
        ("tests/test_results_pages.py",),
        "one step time of the train_step benchmark is changed: the sort table's cost column no longer shows its data",
    ),
    Mutant(
        "decode-ratio-inverted",
        "rfa/experiments/benchmarks/train_step.py",
        'ratios: {} if reference is None else {f"{k}_over_exact": t / reference for k, t in times.items()},',
        'ratios: {} if reference is None else {f"{k}_over_exact": reference / t for k, t in times.items()},',
        ("tests/experiments/test_benchmark_smoke.py",),
        "the train_step benchmark's ratios (step and decoded token) divide exact attention's time by the kind's",
    ),
    Mutant(
        "delta-rule-ratio-inverted",
        "rfa/experiments/benchmarks/result_tables.py",
        '    return row[top]["median_ms"] / row[bottom]["median_ms"]\n',
        '    return row[bottom]["median_ms"] / row[top]["median_ms"]\n',
        ("tests/test_results_pages.py",),
        "the delta-rule benchmark's ratios (its JSON and its CPU and GPU tables) divide the other way",
    ),
    Mutant(
        "cost-columns-from-the-runs",
        "rfa/experiments/tables.py",
        "    if key in STEP_TIMES:\n",
        "    if False:\n",
        ("tests/test_results_pages.py",),
        "the sort and recall tables take their step times from the runs again instead of the side-by-side benchmark",
    ),
    Mutant(
        "tie-word-beside-not-separated",
        "docs/results/vision.md",
        "At this scale the digits do not tell the kinds apart",
        "At this scale the kinds train as well as exact attention",
        ("tests/test_results_pages.py::test_a_page_orders_results_only_in_claims_that_check_the_order",),
        "a page says the kinds train as well as exact attention where every verdict is not separated",
    ),
    Mutant(
        "benchmark-ratio-rounded",
        "docs/results/benchmarks.md",
        "It costs 32–63x the unbiased attention",
        "It costs 30–60x the unbiased attention",
        ("tests/test_results_pages.py::test_every_sentence_with_a_number_holds_against_its_json",),
        "the benchmarks page rounds a ratio its JSON gives (the relative bias's 32–63x written 30–60x)",
    ),
    Mutant(
        "claim-range-from-the-wrong-kinds",
        "docs/results/recall.md",
        "ReLU features fall to 0.482 at m = 4",
        "ReLU features fall to 0.48 at m = 4",
        ("tests/test_results_pages.py",),
        "a sentence of a results page no longer quotes its JSON",
    ),
    Mutant(
        "forecast-selected-on-test",
        "rfa/experiments/studies/forecasting.py",
        'scale: float(np.mean([r["validation"]["mse"]["mean"] for r in rows])) for scale',
        'scale: float(np.mean([r["test"]["mse"]["mean"] for r in rows])) for scale',
        (
            "tests/experiments/test_forecast.py::test_a_configuration_is_selected_on_validation_and_only_its_runs_are_reported",
        ),
        "the forecasting configuration is chosen on the test years",
    ),
    Mutant(
        "recall-rate-chosen-on-test",
        "rfa/experiments/studies/recall.py",
        '        sweep[f"{rate:g}"] = row["validation"]["accuracy"]["mean"]',
        '        sweep[f"{rate:g}"] = row["test"]["accuracy"]["mean"]',
        (
            "tests/experiments/test_recall.py::test_each_setting_trains_its_seeds_at_the_rate_of_the_best_validation_accuracy",
        ),
        "the recall study picks each kind's learning rate on the test split",
    ),
    Mutant(
        "custom-sweep-gets-a-verdict",
        "rfa/experiments/sweeps/registry.py",
        "    if not changed:\n",
        "    if True:\n",
        ("tests/experiments/test_runner.py::test_a_users_estimators_run_from_a_module_named_in_the_config",),
        "a sweep with the user's own estimators is judged against the published values",
    ),
    Mutant(
        "figure-styles-cycle-ten",
        "rfa/experiments/styles.py",
        '            chosen[name] = (*KNOWN_STYLES[name], "-")',
        '            chosen[name] = (COLORS[KNOWN.index(name) % 10], "o", "-")',
        ("tests/experiments/test_styles.py",),
        "kinds take matplotlib's ten colors in turn: two share a style",
    ),
    Mutant(
        "figure-two-series-one-style",
        "rfa/experiments/styles.py",
        'HOLLOW = ("per_call",)',
        "HOLLOW = ()",
        ("tests/experiments/test_styles.py::test_a_committed_figure_can_be_read",),
        "an estimator's per-call and calibrated fits in one color and marker, told apart by the dash alone",
    ),
    Mutant(
        "length-floor-counts-padding",
        "rfa/experiments/studies/length_generalization.py",
        "    weights = targets != PAD_ID\n",
        "    weights = np.ones_like(targets, dtype=bool)\n",
        ("tests/experiments/test_length_generalization.py",),
        "the floors count padding as predicted tokens",
    ),
    Mutant(
        "mqar-queries-without-values",
        "rfa/data/mqar.py",
        "    inputs[queries], inputs[queries + 1] = keys, values\n",
        "    inputs[queries] = keys\n",
        ("tests/data/test_mqar.py",),
        "a query is not followed by its value",
    ),
    Mutant(
        "mqar-length-unchecked",
        "rfa/data/mqar.py",
        "    if 4 * num_pairs > length:\n",
        "    if 2 * num_pairs > length:\n",
        ("tests/data/test_mqar.py",),
        "more pairs than the length holds slip through to the generator",
    ),
    Mutant(
        "recall-counts-every-position",
        "rfa/tasks/lm.py",
        '(batch["targets"] != PAD_ID).astype(jnp.float32)',
        'jnp.ones(batch["targets"].shape, jnp.float32)',
        ("tests/data/test_mqar.py",),
        "MQAR accuracy counts the random filler tokens too",
    ),
    Mutant(
        "python-source-without-test-files",
        "rfa/data/python_source.py",
        '{0: "validation", 1: "test"}',
        '{0: "validation", 1: "validation"}',
        ("tests/data/test_data.py::test_python_source_splits_by_file",),
        "python_source's test split is empty",
    ),
    Mutant(
        "listops-cpu-with-every-operator",
        "rfa/data/listops.py",
        "    operator = rng.choice(list(config.operators))\n",
        "    operator = rng.choice(list(OPERATORS))\n",
        ("tests/data/test_data.py::test_the_cpu_scale_of_listops_keeps_max_and_min_at_small_depth",),
        "the CPU scale of ListOps draws MED and SM too",
    ),
    Mutant(
        "every-seed-trains-the-first",
        "rfa/experiments/seeded.py",
        "        seeded.seed = seed\n",
        "        seeded.seed = seeds[0]\n",
        ("tests/test_docs.py::test_a_page_runs_as_written[howto/training.md]",),
        "the seeds of a study all train the same run: no spread",
    ),
    Mutant(
        "state-bytes-of-every-layer",
        "rfa/experiments/studies/recall.py",
        "jax.tree.leaves(caches)) / len(caches))",
        "jax.tree.leaves(caches)))",
        ("tests/experiments/test_recall.py",),
        "the recall study's state size counts all layers, not one",
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
    Mutant(
        "fourier-decode-without-mask",
        "rfa/models/softmax.py",
        "radius=self.radius, mask=mask[:, None, None, :])[:, 0]",
        "radius=self.radius)[:, 0]",
        ("tests/models/test_attention_kinds.py",),
        "a decoded Fourier token attends to empty cache slots",
    ),
    # Relative positional bias by FFT (issue 30).
    Mutant(
        "relative-causal-sees-the-future",
        RELATIVE,
        "    if causal:  # c_n = 0 for n < 0",
        "    if False:  # c_n = 0 for n < 0",
        RELATIVE_TESTS,
        "causal relative-bias attention weighs later keys too",
    ),
    Mutant(
        "relative-fft-wraps-around",
        RELATIVE,
        "    size = 1 << (2 * length - 2).bit_length()",
        "    size = 1 << (length - 1).bit_length()",
        RELATIVE_TESTS,
        "an FFT shorter than 2L - 1: the circular convolution wraps onto the sums",
    ),
    Mutant(
        "relative-dense-lags-reversed",
        RELATIVE,
        "    lags = jnp.arange(length)[:, None] - jnp.arange(length)[None, :]",
        "    lags = jnp.arange(length)[None, :] - jnp.arange(length)[:, None]",
        RELATIVE_TESTS,
        "the short sequences' L × L form weighs key j for query i by b_{j−i}",
    ),
    Mutant(
        "relative-bias-without-gradient",
        RELATIVE,
        "    kernel = jnp.exp(bias - bias_max)\n",
        "    kernel = jax.lax.stop_gradient(jnp.exp(bias - bias_max))\n",
        RELATIVE_TESTS,
        "the relative bias learns nothing",
    ),
    # One decay per feature (issue 30).
    Mutant(
        "feature-decay-averaged",
        PREPARE,
        "            log_decay = jnp.moveaxis(jnp.broadcast_to(",
        "            log_decay = jnp.mean(log_decay, -1, keepdims=True)\n"
        "            log_decay = jnp.moveaxis(jnp.broadcast_to(",
        ("tests/attention/test_per_feature_decay.py",),
        "a per-feature decay is applied as its mean",
    ),
    Mutant(
        "feature-decay-state-by-the-first-feature",
        CAUSAL,
        "        state = state * jnp.exp(state_log[..., -1:, :] - chunk_ref) + kv\n",
        "        state = state * jnp.exp(state_log[..., -1:, :1] - chunk_ref) + kv\n",
        ("tests/attention/test_per_feature_decay.py",),
        "the state between chunks decays at one feature's rate",
    ),
    Mutant(
        "sequence-parallel-feature-decay-summed",
        SEQUENCE_PARALLEL,
        "    block_decay = jnp.sum(decay, axis=-3)",
        "    block_decay = jnp.sum(decay, axis=(-3, -1), keepdims=True)[..., 0, :]",
        ("tests/attention/test_sequence_parallel.py",),
        "a block's per-feature decays summed over the features",
    ),
    Mutant(
        "gla-gate-per-head",
        "rfa/models/cores.py",
        "                logits = logits.reshape(logits.shape[:-1] + (self.num_heads, -1))",
        "                logits = logits.reshape(logits.shape[:-1] + (self.num_heads, -1))[..., :1]",
        ("tests/models/test_attention_kinds.py",),
        "a per-feature gate decays every feature by the first one's",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "longer-model-keeps-its-initialization",
        "rfa/train/trained.py",
        "    nnx.update(model, kept)\n    return model\n",
        "    return model\n",
        (LONGER_TEST,),
        "a model rebuilt for longer sequences loses its trained weights",
    ),
    Mutant(
        "longer-model-shapes-unchecked",
        "rfa/train/trained.py",
        "        if old.shape != new.shape:\n",
        "        if False:\n",
        (LONGER_TEST,),
        "learned positions are silently replaced by a table of another length",
    ),
    Mutant(
        "longer-strings-not-longer",
        "rfa/data/algorithmic.py",
        "            min_length=33,\n",
        "            min_length=2,\n",
        ("tests/data/test_data.py::test_longer_strings_lie_beyond_every_training_length",),
        "the longer strings overlap the training lengths",
    ),
    Mutant(
        "length-study-evaluates-the-training-task",
        "rfa/experiments/studies/length_generalization.py",
        "    config.task, config.eval_batches = study.longer_task, study.longer_batches",
        "    config.eval_batches = study.longer_batches",
        ("tests/experiments/test_length_generalization.py",),
        "the longer-length accuracy is the training length's",
    ),
    Mutant(
        "model-error-not-centered",
        ESTIMATORS_IN_MODELS,
        "    return jnp.sqrt(error / jnp.sum(jnp.where(rows, (exact - mean) ** 2, 0.0)))",
        "    return jnp.sqrt(error / jnp.sum(jnp.where(rows, exact**2, 0.0)))",
        (ESTIMATORS_TESTS,),
        "the relative error divides by the uncentered norm (a shared offset counts as signal)",
    ),
    Mutant(
        "model-variance-not-relative",
        ESTIMATORS_IN_MODELS,
        "num_features, **params) - 2 * log_sm)",
        "num_features, **params) - log_sm)",
        (ESTIMATORS_TESTS,),
        "the closed-form variance is divided by κ, not κ²",
    ),
    Mutant(
        "model-variance-unscaled",
        ESTIMATORS_IN_MODELS,
        "    scale = q.shape[-1] ** -0.25\n",
        "    scale = 1.0\n",
        (ESTIMATORS_TESTS,),
        "the variance is of exp(qᵀk), not of the softmax logit's exp(qᵀk/√d)",
    ),
    Mutant(
        "calibrated-layer-fit-per-call",
        ESTIMATORS_IN_MODELS,
        '    q, k, _, key_mask, _ = site if fit == "per_call" else calibration_site',
        "    q, k, _, key_mask, _ = site",
        (ESTIMATORS_TESTS,),
        "the calibrated layer error fits to the measured batch itself",
    ),
    Mutant(
        "qk-scale-queries-only",
        "rfa/experiments/studies/estimators_in_models/qk_scale.py",
        "    return (q * s, k * s, *rest)",
        "    return (q * s, k, *rest)",
        (ESTIMATORS_TESTS,),
        "the q/k-scale sweep scales the queries only (the logits by s, not s²)",
    ),
    Mutant(
        "qk-scale-sweep-unscaled",
        "rfa/experiments/studies/estimators_in_models/qk_scale.py",
        "        sites = [scaled(site, s) for site in prepared.sites]\n",
        "        sites = list(prepared.sites)\n",
        (ESTIMATORS_TESTS,),
        "the sweep measures the model's own q and k at every s",
    ),
    Mutant(
        "shared-attention-calibrated",
        "rfa/attention/map_variables.py",
        "        if uses[id(fn)] > 1:\n",
        "        if uses[id(fn)] > 2:\n",
        ("tests/random_features/test_dense_exponential.py",),
        "one attention module shared by two sites is calibrated to whichever ran last",
    ),
    Mutant(
        "pathfinder-distance-unmatched",
        "rfa/data/pathfinder.py",
        "                pairs = np.abs(distances - span) <= config.distance_tolerance\n",
        "                pairs = np.abs(distances - span) >= 0.0\n",
        ("tests/data/test_long_range_arena.py",),
        "label-0 dots at any distance: a threshold on their distance reads the label",
    ),
    Mutant(
        "distill-first-seed-only",
        "rfa/experiments/studies/distillation.py",
        "Spread.of(result[field] for result in results)",
        "Spread.of(results[0][field] for result in results)",
        ("tests/experiments/test_distill.py",),
        "the distillation table reports the first seed as every seed's",
    ),
    Mutant(
        "delta-wy-solve-sign",
        DELTA_CHUNKED,
        "    system = beta[..., None] * decayed_scores(k, k, g)[0]",
        "    system = -beta[..., None] * decayed_scores(k, k, g)[0]",
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
        "gla-state-read-unscaled",
        CAUSAL,
        '"...qf,...df->...qd", phi_q_c * jnp.exp(state_log - ref), state',
        '"...qf,...df->...qd", phi_q_c, state',
        PER_FEATURE_TESTS,
        "with a decay per feature, queries read the carried state without its decay and reference",
    ),
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
        '    diagonal = jnp.einsum("...aif,...ajf,...aijf->...aij", xs, ys, jnp.exp(diagonal_log),'
        " precision=precision)\n",
        '    diagonal = jnp.einsum("...aif,...ajf->...aij", queries, ys, precision=precision) * causal[..., 0]\n',
        PER_FEATURE_TESTS,
        "a diagonal sub-chunk weighed as one below it: keys undecayed, queries decayed from the sub-chunk's start",
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
        "window-off-by-one",
        "rfa/attention/sliding_window.py",
        "    inside = (distance >= 0) & (distance < window) if is_causal",
        "    inside = (distance >= 0) & (distance <= window) if is_causal",
        ("tests/attention/test_sliding_window.py",),
        "a causal window of w sees w + 1 keys",
    ),
    Mutant(
        "window-ring-off-by-one",
        "rfa/models/sliding_window.py",
        '        write = (slots == cache["count"][:, None] % slots.size) & keep[:, None]',
        '        write = (slots == (cache["count"][:, None] + 1) % slots.size) & keep[:, None]',
        (HYBRID_TESTS,),
        "decoding overwrites a token still inside the window instead of the one that left it",
    ),
    Mutant(
        "sequence-parallel-flax-mask-pattern-swapped",
        "rfa/attention/kernelized/api.py",
        "[lambda: attend(False), lambda: attend(True)]",
        "[lambda: attend(True), lambda: attend(False)]",
        ("tests/attention/test_sequence_parallel.py",),
        "a traced Flax padding mask runs the causal form across devices, and a causal one the bidirectional",
    ),
    Mutant(
        "checked-passes-the-runtime-error",
        "rfa/checks.py",
        "            if _failures:\n                raise _failures[-1] from runtime_error\n",
        "",
        ("tests/attention/test_masks.py",),
        "rfa.checks.checked lets a failed check out as JaxRuntimeError, not rfa.InputError",
    ),
    Mutant(
        "recall-sweep-at-the-smallest-m",
        "rfa/experiments/studies/recall.py",
        "swept_at = counts[len(counts) // 2] if study.sweep_per_kind else m",
        "swept_at = counts[0] if study.sweep_per_kind else m",
        ("tests/experiments/test_recall.py",),
        "the per-kind learning-rate sweep runs at the smallest m instead of the middle one",
    ),
    Mutant(
        "window-prefill-slots",
        "rfa/models/sliding_window.py",
        "        latest = slots + ring * ((count[:, None] - 1 - slots) // ring)",
        "        latest = slots + ring * ((count[:, None] - 2 - slots) // ring)",
        (HYBRID_TESTS,),
        "a prompt's ring holds the token one turn before the last kept one in that token's slot",
    ),
    Mutant(
        "window-prefill-counts-padding",
        "rfa/models/sliding_window.py",
        "        count = jnp.sum(key_mask, axis=1, dtype=jnp.int32)",
        "        count = jnp.full(key_mask.shape[:1], key_mask.shape[1], jnp.int32)",
        (HYBRID_TESTS,),
        "a right-padded prompt's padding takes slots of the ring, over the last real tokens",
    ),
    Mutant(
        "padding-shifted-into-conv-history",
        "rfa/models/short_convolution.py",
        "    last = jnp.sum(keep, axis=1)[:, None] + jnp.arange(taps - 1)",
        "    last = keep.shape[1] + jnp.arange(taps - 1)",
        ("tests/attention/test_state_layers.py",),
        "the short convolution's history is the last K − 1 inputs, padding included, not the last kept ones",
    ),
    Mutant(
        "window-prefill-not-compacted",
        "rfa/models/sliding_window.py",
        "jnp.take_along_axis(jnp.take_along_axis(y, order, axis=1), index, axis=1)",
        "jnp.take_along_axis(y, index, axis=1)",
        (HYBRID_TESTS,),
        "a prompt's ring is filled by position, so padding before the last kept tokens shifts them out of it",
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
        "conv-over-padding",
        "rfa/models/short_convolution.py",
        "    order = jnp.argsort(~keep, axis=1, stable=True)  # each row's kept positions first, in order",
        "    order = jnp.broadcast_to(jnp.arange(length), keep.shape)",
        ("tests/attention/test_state_layers.py",),
        "the short convolution runs over padding between tokens instead of skipping it",
    ),
    Mutant(
        "gva-heads-tiled",
        "rfa/models/delta_rule.py",
        "        q, k = (jnp.repeat(y, hv // h, axis=2) for y in (q, k))",
        "        q, k = (jnp.tile(y, (1, 1, hv // h, 1)) for y in (q, k))",
        ("tests/attention/test_fla_layers.py",),
        "grouped value heads paired with the wrong query/key head",
    ),
    Mutant(
        "negative-eigenvalues-ignored",
        "rfa/models/delta_rule.py",
        "beta * (2.0 if o.allow_neg_eigval else 1.0)",
        "beta",
        ("tests/attention/test_fla_layers.py",),
        "allow_neg_eigval leaves β in [0, 1]",
    ),
    Mutant(
        "conv-bias-dropped",
        "rfa/models/delta_rule.py",
        '                qkv = qkv + weights["conv_bias"]',
        "                qkv = qkv",
        ("tests/attention/test_fla_layers.py",),
        "the short convolution's bias (fla's conv_bias) is loaded but not added",
    ),
    Mutant(
        "gqa-kv-heads-tiled",
        "rfa/models/attention.py",
        "        return jnp.repeat(k, self.groups, axis=-2), jnp.repeat(v, self.groups, axis=-2)",
        "        return (jnp.tile(x, (1,) * (x.ndim - 2) + (self.groups, 1)) for x in (k, v))",
        (HYBRID_TESTS,),
        "a site's grouped-query heads read the wrong key/value head",
    ),
    Mutant(
        "rope-base-ignored",
        "rfa/models/attention.py",
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
        "window-over-positions",
        "rfa/models/sliding_window.py",
        "        order = jnp.argsort(~key_mask, axis=1, stable=True)  # each row's kept tokens first, in order",
        "        order = jnp.broadcast_to(jnp.arange(key_mask.shape[1]), key_mask.shape)",
        ("tests/attention/test_state_layers.py",),
        "the full pass lays the window over positions, padding included, while the ring counts kept tokens",
    ),
    Mutant(
        "split-conv-history-from-no-block",
        "rfa/models/short_convolution.py",
        "    return last_kept(jax.lax.axis_index(axis)), invariant(last_kept(flags.shape[0] - 1), axis)",
        "    return history.astype(x.dtype), invariant(last_kept(flags.shape[0] - 1), axis)",
        ("tests/attention/test_sequence_parallel_layers.py",),
        "split along L, each block's convolution starts from the layer's history, not from the blocks before it",
    ),
    Mutant(
        "split-conv-history-skips-the-block-before",
        "rfa/models/short_convolution.py",
        "        use = flags & (jnp.arange(flags.shape[0]) <= upto)[:, None, None]",
        "        use = flags & (jnp.arange(flags.shape[0]) < upto)[:, None, None]",
        ("tests/attention/test_sequence_parallel_layers.py",),
        "split along L, a block's convolution history leaves out the block just before it",
    ),
    Mutant(
        "hybrid-drops-a-layer-cache",
        "rfa/models/transformer.py",
        "            new_caches.append(cache)\n",
        "            new_caches.append(caches[i] if i else cache)\n",
        (HYBRID_TESTS,),
        "decoding keeps the old cache of every layer but the first",
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
        "packed-conv-history-not-cut",
        "rfa/models/short_convolution.py",
        "        history = jnp.where(jnp.take_along_axis(index, last[..., None], axis=1) == final, history, 0.0)\n",
        "",
        (PACKED_TESTS,),
        "a packed prefill's convolution history holds inputs of the sequences before the last one",
    ),
    Mutant(
        "packed-window-reads-other-sequences",
        "rfa/attention/sliding_window.py",
        "        allowed = allowed & (query_ids == key_ids[..., None, :])",
        "        allowed = allowed & (query_ids == query_ids)",
        (PACKED_TESTS,),
        "the window attends across a sequence boundary",
    ),
    # The keywords renamed in 0.3 (kind=, projection=) keep working for one release.
    Mutant(
        "renamed-keyword-dropped",
        "rfa/_validation.py",
        "                kwargs[new] = kwargs.pop(old)\n",
        "                kwargs.pop(old)\n",
        (
            "tests/random_features/test_projections.py::test_the_keyword_of_before_0_3_draws_the_same_rows_with_a_warning",
            "tests/random_features/test_theory.py::test_the_keyword_of_before_0_3_gives_the_same_closed_form_with_a_warning",
        ),
        "an old keyword is dropped with its warning instead of passed on under its new name",
    ),
]


def check_mutants(root: str = ROOT) -> list[str]:
    """Problems with the list: unknown files or tests, snippets that do not occur exactly once, duplicate ids."""
    problems, seen = [], set()
    for mutant in MUTANTS:
        if mutant.id in seen:
            problems.append(f"{mutant.id}: duplicate id")
        seen.add(mutant.id)
        path = os.path.join(root, mutant.path)
        if not os.path.exists(path):
            problems.append(f"{mutant.id}: no file {mutant.path}")
            continue
        with open(path) as f:
            count = f.read().count(mutant.original)
        if count != 1:
            problems.append(f"{mutant.id}: its snippet occurs {count} times in {mutant.path}")
        for test in mutant.tests:
            file, _, name = test.partition("::")
            if not os.path.exists(os.path.join(root, file)):
                problems.append(f"{mutant.id}: no test file {file}")
            elif name:
                with open(os.path.join(root, file)) as f:
                    if f"def {name.partition('[')[0]}(" not in f.read():  # a parametrized test's case: its function
                        problems.append(f"{mutant.id}: no test {name} in {file}")
    return problems


def _copy_repository(destination: str) -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if os.path.exists(os.path.join(ROOT, name)):
            os.makedirs(os.path.dirname(os.path.join(destination, name)) or destination, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), os.path.join(destination, name))


def run(mutants: list[Mutant], report_path: str, timeout: int) -> list[tuple[Mutant, str, str, float]]:
    """Applies each mutant in a scratch copy, runs its tests; returns ``(mutant, outcome, detail, seconds)``."""
    results = []
    with tempfile.TemporaryDirectory(prefix="rfa-mutants-") as scratch:
        _copy_repository(scratch)
        for mutant in mutants:
            path = os.path.join(scratch, mutant.path)
            with open(path) as f:
                pristine = f.read()
            with open(path, "w") as f:
                f.write(pristine.replace(mutant.original, mutant.mutated, 1))
            start = time.perf_counter()
            try:
                completed = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "--no-header", *mutant.tests],
                    cwd=scratch,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
                # pytest exits 1 when tests fail; 2-5 mean the run itself broke (a mutant that does not import).
                outcome = {0: "survived", 1: "killed"}.get(completed.returncode, f"error (exit {completed.returncode})")
                failed = [line for line in completed.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
                detail = failed[0] if failed else completed.stdout.strip().splitlines()[-1:][0]
            except subprocess.TimeoutExpired:
                outcome, detail = "timeout", f"tests ran over {timeout} s"
            finally:
                with open(path, "w") as f:
                    f.write(pristine)
            seconds = time.perf_counter() - start
            results.append((mutant, outcome, detail, seconds))
            print(f"{outcome:>8}  {mutant.id}  ({seconds:.0f} s)  {detail}", flush=True)
    _write_report(results, report_path)
    return results


def _write_report(results, report_path: str) -> None:
    killed = sum(outcome == "killed" for _, outcome, _, _ in results)
    lines = [
        "# Mutation testing report",
        "",
        f"`python tools/mutants.py`: {killed} of {len(results)} mutants killed. Each row is one deliberate bug",
        "(tools/mutants.py) and the first test that failed on it.",
        "",
        "| mutant | file | the bug | outcome | first failure | seconds |",
        "|---|---|---|---|---|---:|",
    ]
    for mutant, outcome, detail, seconds in results:
        detail = detail.replace("|", "\\|")
        lines.append(f"| {mutant.id} | {mutant.path} | {mutant.why} | {outcome} | {detail} | {seconds:.0f} |")
    with open(report_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mutant ids (default: all)")
    parser.add_argument("--report", default=os.path.join(ROOT, "tools", "mutants_report.md"))
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant's tests")
    args = parser.parse_args(argv)
    problems = check_mutants()
    if problems:
        print("the mutant list is out of date:\n" + "\n".join(problems), file=sys.stderr)
        return 2
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {m.id for m in MUTANTS}
    if unknown:
        print(f"unknown mutant ids: {sorted(unknown)}", file=sys.stderr)
        return 2
    results = run([m for m in MUTANTS if not wanted or m.id in wanted], args.report, args.timeout)
    survivors = [m.id for m, outcome, _, _ in results if outcome != "killed"]
    print(f"\n{len(results) - len(survivors)} of {len(results)} killed; report: {args.report}")
    if survivors:
        print(f"not killed: {survivors}", file=sys.stderr)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
