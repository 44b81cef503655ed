import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import monte_carlo, normal

import rfa


def test_softmax_and_gaussian_kernels_match_numpy():
    x, y = normal(0, (4, 3, 6), 0.5), normal(1, (3, 6), 0.5)
    np.testing.assert_allclose(rfa.softmax_kernel(x, y), np.exp(np.sum(x * y, -1)), rtol=1e-6)
    np.testing.assert_allclose(rfa.gaussian_kernel(x, y), np.exp(-0.5 * np.sum((x - y) ** 2, -1)), rtol=1e-6)


def test_softmax_is_rescaled_gaussian():
    x, y = normal(2, (5, 4)), normal(3, (5, 4))
    rescale = np.exp(0.5 * np.sum(x * x, -1) + 0.5 * np.sum(y * y, -1))
    np.testing.assert_allclose(rfa.softmax_kernel(x, y), rescale * rfa.gaussian_kernel(x, y), rtol=1e-5)


def test_kernels_keep_dtype():
    x = jnp.ones((2, 4), jnp.bfloat16)
    assert rfa.softmax_kernel(x, x).dtype == jnp.bfloat16
    assert rfa.gaussian_kernel(x, x).dtype == jnp.bfloat16


@pytest.mark.parametrize("estimator", ["trig", "positive", "hyperbolic", "oprf"])
def test_estimate_equals_feature_dot_product(estimator):
    W = rfa.sample_projection(jax.random.key(0), 32, 6)
    x, y = normal(4, (3, 6), 0.4), normal(5, (3, 6), 0.4)
    params = {"phi_sq": 1.5} if estimator == "oprf" else {}
    phi = rfa.estimator(estimator)
    expected = np.sum(np.asarray(phi(x, W, **params)) * np.asarray(phi(y, W, **params)), -1)
    est = rfa.estimate_softmax_kernel(x, y, W, estimator, **params)
    np.testing.assert_allclose(est, expected, rtol=1e-5)


def test_estimate_stays_finite_where_features_alone_would_overflow():
    """φ(x)ᵀφ(y) for trig at |x| = |y| = 9.4 needs exp(88), past float32; the log-scale product is fine."""
    W = rfa.sample_projection(jax.random.key(0), 64, 4)
    x = jnp.array([9.4, 0.0, 0.0, 0.0])
    y = jnp.array([-9.4, 0.0, 0.0, 0.0])
    expected = references.features("trig", x, W) @ references.features("trig", y, W)  # float64: e^88 is fine
    np.testing.assert_allclose(float(rfa.estimate_softmax_kernel(x, y, W, "trig")), expected, rtol=1e-4)


@pytest.mark.parametrize("estimator", ["gaussian_trig", "gaussian_cosine"])
def test_gaussian_estimators_are_unbiased(estimator):
    x, y = normal(6, (5,), 0.5), normal(7, (5,), 0.5)

    def estimate(key):
        w_key, b_key = jax.random.split(key)
        W = rfa.sample_projection(w_key, 16, 5, projection_kind="iid")
        params = {"phases": rfa.sample_phases(b_key, 16)} if estimator == "gaussian_cosine" else {}
        return rfa.estimate_gaussian_kernel(x, y, W, estimator, **params)

    draws = monte_carlo(estimate, 20000)
    exact = float(rfa.gaussian_kernel(x, y))
    assert abs(draws.mean() - exact) < 4 * draws.std() / np.sqrt(len(draws))
    theory = float(rfa.theory.mse(estimator, x, y, 16))
    sq = (draws - exact) ** 2
    assert abs(sq.mean() - theory) < 4 * sq.std() / np.sqrt(len(sq))


def test_estimators_under_jit_vmap_grad():
    W = rfa.sample_projection(jax.random.key(0), 16, 4)
    x, y = normal(8, (7, 4), 0.5), normal(9, (7, 4), 0.5)
    fn = jax.jit(lambda x, y: rfa.estimate_softmax_kernel(x, y, W, "hyperbolic"))
    np.testing.assert_allclose(jax.vmap(fn)(x, y), fn(x, y), rtol=1e-6)
    grad = jax.grad(lambda x: jnp.sum(fn(x, y)))(x)
    direction = normal(10, x.shape)

    def reference(x):
        return np.sum(references.features("hyperbolic", x, W) * references.features("hyperbolic", y, W))

    expected = references.directional_derivative(reference, (x,), 0, direction)
    assert abs(float(np.sum(np.asarray(grad, np.float64) * direction)) - expected) <= 1e-4 * abs(expected)
    exact_grad = jax.jit(jax.grad(lambda x: jnp.sum(rfa.softmax_kernel(x, y))))(x)
    np.testing.assert_allclose(exact_grad, y * np.exp(np.sum(x * y, -1, keepdims=True)), rtol=1e-5)
