"""Mutants of rfa/random_features/: the estimators' feature maps, the projections and their LAPACK
batching, the closed forms.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import REFERENCE_TESTS

SOFTMAX = "rfa/random_features/estimators/softmax.py"

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "oprf-statistic-gradient",
        SOFTMAX,
        "    return jax.lax.stop_gradient(phi)\n",
        "    return phi\n",
        REFERENCE_TESTS,
        "OPRF's data statistic carries a gradient",
    ),
    Mutant(
        "relu-map-wrong",
        "rfa/random_features/estimators/deterministic.py",
        "    return no_log(jax.nn.relu(project(x, W)) + epsilon)",
        "    return no_log(jax.nn.relu(-project(x, W)) + 0.5)",
        ("tests/random_features/test_feature_maps.py",),
        "relu features of -Wx, offset 0.5",
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
]
