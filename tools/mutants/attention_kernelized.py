"""Mutants of rfa/attention/kernelized/: the inputs' preparation, bidirectional and causal kernelized
attention, the API, relative positional bias, the sequence-parallel form.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import PER_FEATURE_TESTS, REFERENCE_TESTS

PREPARE = "rfa/attention/kernelized/prepare.py"
BIDIRECTIONAL = "rfa/attention/kernelized/bidirectional.py"
CAUSAL = "rfa/attention/kernelized/causal.py"
API = "rfa/attention/kernelized/api.py"
SEQUENCE_PARALLEL = "rfa/attention/kernelized/sequence_parallel.py"
RELATIVE = "rfa/attention/kernelized/relative.py"
RELATIVE_TESTS = ("tests/attention/test_relative_bias.py",)

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
        "causal-mask-dropped",
        CAUSAL,
        "    key_log_mask = to_chunks(r.key_log_mask, chunk, -jnp.inf)\n",
        "    key_log_mask = to_chunks(jnp.zeros_like(r.key_log_mask), chunk, -jnp.inf)\n",
        REFERENCE_TESTS,
        "causal attention ignores key padding",
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
        "    q, k = q.astype(dtype), k.astype(dtype)\n",
        "",
        ("tests/attention/test_kernelized.py::test_inputs_with_norm_10_in_low_precision_equal_the_reference",),
        "bfloat16/float16 inputs computed in their own precision",
    ),
    # Masks (issue 13).
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
        "        qh = jnp.where(keep_q, qh, 0.0)\n",
        "        qh = qh + 0.0\n",
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
    # Attention forms.
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
        "phi_q_c, state, **contraction) * jnp.exp(state_log - ref)\n",
        "phi_q_c, state, **contraction)\n",
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
    # The restructuring of release 0.2 (issue 26).
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
        "set-mesh-inputs-not-sharded",
        "rfa/attention/kernelized/api.py",
        "            lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s) if given_mesh else s), value\n",
        "            lambda x: jax.reshard(x, jax.sharding.NamedSharding(mesh, s)) if given_mesh else x, value\n",
        ("tests/attention/test_sequence_parallel.py",),
        "under jax.set_mesh unsharded inputs hit shard_map's error",
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
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "gla-state-read-unscaled",
        CAUSAL,
        '"...qf,...df->...qd", phi_q_c * jnp.exp(state_log - ref), state',
        '"...qf,...df->...qd", phi_q_c, state',
        PER_FEATURE_TESTS,
        "with a decay per feature, queries read the carried state without its decay and reference",
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
        "float64-queries-scaled-in-float32",
        PREPARE,
        "    dtype = computation_dtype(q, k)\n    q, k = q.astype(dtype), k.astype(dtype)",
        "    dtype = jnp.float32\n    q, k = q.astype(dtype), k.astype(dtype)",
        ("tests/attention/test_against_references.py",),
        "float64 queries and keys are cast to float32 for the map: a float64 call keeps float32's precision",
    ),
    Mutant(
        "kernelized-compute-dtype-ignored",
        PREPARE,
        '        return {"precision": self.precision, "operands": self.compute_dtype}',
        '        return {"precision": self.precision, "operands": None}',
        ("tests/attention/test_precision.py",),
        "compute_dtype=bfloat16 leaves kernelized attention's matmuls on float32 operands",
    ),
]
