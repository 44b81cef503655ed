import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

import rfa

D, M = 8, 16
W = rfa.sample_projection(jax.random.key(0), M, D)
PHASES = rfa.sample_phases(jax.random.key(1), M)
PARAMS = {"gerf": {"A": -0.1}, "oprf": {"phi_sq": 2.0}, "gaussian_cosine": {"phases": PHASES}}
NAMES = ["trig", "positive", "hyperbolic", "gerf", "oprf", "relu", "elu", "gaussian_trig", "gaussian_cosine"]


def call(name, x, **kwargs):
    fm = rfa.feature_map(name)
    return fm(x, W if fm.needs_projection else None, **PARAMS.get(name, {}), **kwargs)


def test_registry_lists_every_map():
    assert set(NAMES) <= set(rfa.registered_feature_maps())
    fm = rfa.feature_map("positive")
    assert rfa.feature_map(fm) is fm


def test_registering_a_taken_name_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        rfa.register_feature_map(rfa.feature_map("positive"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_shape_and_dtype(name, dtype):
    x = jnp.asarray(normal(0, (3, 5, D)), dtype)
    out = call(name, x)
    assert out.shape == (3, 5, rfa.feature_map(name).num_outputs(M, D))
    assert out.dtype == dtype


@pytest.mark.parametrize("name", NAMES)
def test_every_map_matches_its_formula(name):
    """Against tests/references.py, written from the papers' formulas in float64 (never rfa's code)."""
    x = normal(1, (4, 3, D), 0.7)
    params = {"gerf": {"A": -0.1}, "oprf": {"phi_sq": 2.0}, "gaussian_cosine": {"phases": np.asarray(PHASES)}}
    expected = references.features(
        name, x, W if rfa.feature_map(name).needs_projection else None, **params.get(name, {})
    )
    np.testing.assert_allclose(call(name, x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda x: call(name, x))(x), expected, rtol=1e-5, atol=1e-6)


def test_gerf_at_zero_is_positive():
    x = normal(3, (4, D))
    np.testing.assert_allclose(rfa.feature_map("gerf")(x, W, A=0.0), call("positive", x), rtol=1e-6)


def test_oprf_is_gerf_at_the_optimal_parameter():
    x = normal(4, (4, D))
    A = rfa.optimal_gerf_parameter(3.0, D)
    np.testing.assert_allclose(rfa.feature_map("oprf")(x, W, phi_sq=3.0), rfa.feature_map("gerf")(x, W, A=A), rtol=1e-6)


@pytest.mark.parametrize("name", ["positive", "hyperbolic", "gerf", "oprf", "relu", "elu"])
def test_positive_maps_are_nonnegative(name):
    assert bool(jnp.all(call(name, normal(6, (50, D), 2.0)) >= 0))


@pytest.mark.parametrize("name", NAMES)
def test_stabilized_features_times_scale_are_the_features(name):
    fm = rfa.feature_map(name)
    x = normal(7, (6, D))
    phi_tilde, s = fm.split(x, W if fm.needs_projection else None, **PARAMS.get(name, {}))
    np.testing.assert_allclose(call(name, x, stabilize=True), phi_tilde, rtol=1e-6)
    np.testing.assert_allclose(phi_tilde * np.exp(s), call(name, x), rtol=1e-5, atol=1e-6)
    if fm.kernel is not None:  # the random maps are bounded; relu and elu grow with x
        assert float(jnp.max(jnp.abs(phi_tilde))) <= 1.0 + 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("stabilize", [False, True])
def test_norms_up_to_10_stay_finite(name, dtype, stabilize):
    x = normal(8, (64, D))
    x = x / np.linalg.norm(x, axis=-1, keepdims=True) * np.linspace(0.0, 10.0, 64)[:, None]
    out = call(name, jnp.asarray(x, dtype), stabilize=stabilize)
    assert bool(jnp.all(jnp.isfinite(out.astype(jnp.float32))))


@pytest.mark.parametrize("name", NAMES)
def test_jit_vmap_grad(name):
    x = normal(9, (5, D), 0.5)
    fn = jax.jit(lambda x: call(name, x))
    np.testing.assert_allclose(fn(x), call(name, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.vmap(fn)(x[:, None]), fn(x)[:, None], rtol=1e-5, atol=1e-6)
    grad = jax.grad(lambda x: jnp.sum(fn(x) ** 2))(x)
    assert bool(jnp.all(jnp.isfinite(grad)))


def test_gradient_matches_finite_differences():
    x = normal(10, (D,), 0.5).astype(np.float64)
    f = jax.jit(lambda x: jnp.sum(jnp.sin(call("positive", x))))
    grad = np.asarray(jax.grad(f)(jnp.asarray(x, jnp.float32)))
    eps = 1e-2
    for i in range(3):
        e = np.zeros(D, np.float32)
        e[i] = eps
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
        np.testing.assert_allclose(grad[i], fd, rtol=2e-2, atol=1e-4)
