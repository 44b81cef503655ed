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
REFERENCE_PARAMS = {**PARAMS, "gaussian_cosine": {"phases": np.asarray(PHASES)}}
NAMES = ["trig", "positive", "hyperbolic", "gerf", "oprf", "relu", "elu", "gaussian_trig", "gaussian_cosine"]


def call(name, x, **kwargs):
    fm = rfa.estimator(name)
    return fm(x, W if fm.needs_projection else None, **PARAMS.get(name, {}), **kwargs)


def test_registry_lists_every_map():
    assert set(NAMES) <= set(rfa.registered_estimators())
    fm = rfa.estimator("positive")
    assert rfa.estimator(fm) is fm


def test_registering_a_taken_name_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        rfa.register_estimator(rfa.estimator("positive"))


def test_the_names_of_before_0_3_are_the_estimator_functions_with_a_warning():
    """``rfa.feature_map``, ``register_feature_map``, ``registered_feature_maps`` and the ``feature_map=`` keyword
    are ``rfa.estimator``, ``register_estimator``, ``registered_estimators`` and ``estimator=`` (docs/changelog.md)."""
    with pytest.warns(DeprecationWarning, match=r"rfa.feature_map is rfa.estimator since rfa 0.3"):
        assert rfa.feature_map("oprf") is rfa.estimator("oprf")
    with pytest.warns(DeprecationWarning, match="rfa.registered_feature_maps is rfa.registered_estimators"):
        assert rfa.registered_feature_maps() == rfa.registered_estimators()
    with (
        pytest.warns(DeprecationWarning, match="rfa.register_feature_map is rfa.register_estimator"),
        pytest.raises(ValueError, match="already registered"),
    ):
        rfa.register_feature_map(rfa.estimator("positive"))
    x = jnp.asarray(normal(2, (1, 5, 2, D)))
    new = rfa.kernelized_attention(x, x, x, estimator="positive", projection=W, is_causal=True)
    with pytest.warns(DeprecationWarning, match=r"kernelized_attention\(feature_map=...\) is kernelized_attention\(es"):
        old = rfa.kernelized_attention(x, x, x, feature_map="positive", projection=W, is_causal=True)
    np.testing.assert_array_equal(old, new)
    with pytest.raises(TypeError, match="got feature_map= and estimator="):
        rfa.kernelized_attention(x, x, x, feature_map="elu", estimator="elu", projection=None)


def test_each_parameter_is_described_once_by_its_spec():
    oprf, derf, hedgehog = (rfa.estimator(n) for n in ("oprf", "aderf", "hedgehog"))
    assert oprf.fitted == ("phi_sq",) and oprf.param("phi_sq").per_token and oprf.required == ("phi_sq",)
    assert derf.event_ndim("A") == 1 and derf.event_ndim("query_transform") == 2
    assert set(derf.fitted) == {"A", "query_transform", "key_transform"} and derf.required == ("A",)
    assert hedgehog.learned == ("weight", "bias") and rfa.estimator("hybrid").sampled == ("angular",)
    assert rfa.FeatureMap is rfa.Estimator  # the name before 0.2


def _terms(x, W, **params):
    return None, x


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"params": (rfa.Param("a"), rfa.Param("a"))}, "described twice"),
        ({"params": (rfa.Param("a", "fitted"),)}, "fitted parameters need fit"),
        ({"fit": lambda q, k, keep_q=None, keep_k=None: {}}, "fit needs fitted parameters"),
        ({"params": (rfa.Param("a", "sampled"),)}, "sampled parameters need sample_params"),
        ({"params": (rfa.Param("a", "learned"),)}, "learned parameters need init_learned"),
        ({"params": ("a",)}, "must be rfa.Param specs"),
    ],
)
def test_an_inconsistent_estimator_is_refused(kwargs, error):
    with pytest.raises((TypeError, ValueError), match=error):
        rfa.Estimator("toy", _terms, None, 0, temperature_scaled=False, **kwargs)


def test_a_param_spec_checks_its_source_and_event_axes():
    with pytest.raises(ValueError, match="source must be one of"):
        rfa.Param("a", "guessed")
    with pytest.raises(ValueError, match="per_token=True"):
        rfa.Param("a", event_ndim=1)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_shape_and_dtype(name, dtype):
    x = jnp.asarray(normal(0, (3, 5, D)), dtype)
    out = call(name, x)
    assert out.shape == (3, 5, rfa.estimator(name).num_outputs(M, D))
    assert out.dtype == dtype


@pytest.mark.parametrize("name", NAMES)
def test_every_map_matches_its_formula(name):
    """Against tests/references.py, written from the papers' formulas in float64 (never rfa's code)."""
    x = normal(1, (4, 3, D), 0.7)
    projection = W if rfa.estimator(name).needs_projection else None
    expected = references.features(name, x, projection, **REFERENCE_PARAMS.get(name, {}))
    np.testing.assert_allclose(call(name, x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda x: call(name, x))(x), expected, rtol=1e-5, atol=1e-6)


def test_gerf_at_zero_is_positive():
    x = normal(3, (4, D))
    np.testing.assert_allclose(rfa.estimator("gerf")(x, W, A=0.0), call("positive", x), rtol=1e-6)


def test_oprf_is_gerf_at_the_optimal_parameter():
    x = normal(4, (4, D))
    A = rfa.optimal_gerf_parameter(3.0, D)
    np.testing.assert_allclose(rfa.estimator("oprf")(x, W, phi_sq=3.0), rfa.estimator("gerf")(x, W, A=A), rtol=1e-6)


@pytest.mark.parametrize("name", ["positive", "hyperbolic", "gerf", "oprf", "relu", "elu"])
def test_positive_maps_are_nonnegative(name):
    assert bool(jnp.all(call(name, normal(6, (50, D), 2.0)) >= 0))


@pytest.mark.parametrize("name", NAMES)
def test_stabilized_features_times_scale_are_the_features(name):
    fm = rfa.estimator(name)
    x = normal(7, (6, D))
    phi_tilde, s = fm.split(x, W if fm.needs_projection else None, **PARAMS.get(name, {}))
    np.testing.assert_allclose(call(name, x, stabilize=True), phi_tilde, rtol=1e-6)
    np.testing.assert_allclose(phi_tilde * np.exp(s), call(name, x), rtol=1e-5, atol=1e-6)
    if fm.kernel is not None:  # the random maps are bounded; relu and elu grow with x
        assert float(jnp.max(jnp.abs(phi_tilde))) <= 1.0 + 1e-6


EXPONENTIAL = {"positive", "hyperbolic", "gerf", "oprf"}


def stabilized_reference(name, x):
    """φ̃ = φ exp(-s), s = max log φ per row: the largest exponential feature is 1; trig drops exp(|x|²/2)."""
    phi = references.features(
        name, x, W if rfa.estimator(name).needs_projection else None, **REFERENCE_PARAMS.get(name, {})
    )
    if name == "trig":
        return phi / np.exp(np.sum(x * x, -1, keepdims=True) / 2)
    return phi / phi.max(-1, keepdims=True) if name in EXPONENTIAL else phi


@pytest.mark.parametrize("name", NAMES)
def test_norms_up_to_10_match_the_reference_in_every_dtype(name):
    """Measured error relative to each row's largest feature: at most 37 float32 eps unstabilized, 21
    stabilized, and half an ulp of rounding in bfloat16 and float16; the tolerances are twice that.
    Unstabilized features at norm 10 are not representable in float16 (e^50 > 65504): attention always
    uses the stabilized ones there."""
    x = normal(8, (64, D))
    x = x / np.linalg.norm(x, axis=-1, keepdims=True) * np.linspace(0.0, 10.0, 64)[:, None]
    eps32 = float(jnp.finfo(jnp.float32).eps)
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
        x_rounded = jnp.asarray(x, dtype)
        x64 = np.asarray(x_rounded.astype(jnp.float32), np.float64)  # the reference sees the same inputs
        rounding = 0.0 if dtype == jnp.float32 else float(jnp.finfo(dtype).eps)
        cases = [(True, stabilized_reference(name, x64), 42 * eps32)]
        if dtype != jnp.float16:
            params = REFERENCE_PARAMS.get(name, {})
            projection = W if rfa.estimator(name).needs_projection else None
            cases.append((False, references.features(name, x64, projection, **params), 74 * eps32))
        for stabilize, expected, computation in cases:
            out = np.asarray(call(name, x_rounded, stabilize=stabilize).astype(jnp.float32), np.float64)
            scale = np.abs(expected).max(-1, keepdims=True)
            tolerance = np.broadcast_to((computation + rounding) * scale + 1e-30, out.shape)
            np.testing.assert_array_less(np.abs(out - expected), tolerance, err_msg=f"{dtype}, stabilize={stabilize}")


@pytest.mark.parametrize("name", NAMES)
def test_jit_vmap_grad(name):
    """vmap equals the batched call; the gradient of Σ sin(φ(x)) w.r.t. x and W equals central differences
    of the float64 reference (directional derivatives)."""
    x = normal(9, (5, D), 0.5)
    fm = rfa.estimator(name)
    projection = W if fm.needs_projection else None
    fn = jax.jit(lambda x, W: fm(x, W, **PARAMS.get(name, {})))
    np.testing.assert_allclose(jax.vmap(fn, in_axes=(0, None))(x, projection), fn(x, projection), rtol=1e-5, atol=1e-6)
    argnums = (0, 1) if fm.needs_projection else (0,)
    grads = jax.jit(jax.grad(lambda x, W: jnp.sum(jnp.sin(fn(x, W))), argnums=argnums))(x, projection)

    def reference(x, W):
        return np.sum(np.sin(references.features(name, x, W, **REFERENCE_PARAMS.get(name, {}))))

    rng = np.random.default_rng(10)
    for i, grad in zip(argnums, grads, strict=True):
        direction = rng.standard_normal(np.shape((x, projection)[i]))
        expected = references.directional_derivative(reference, (x, projection), i, direction)
        derivative = float(np.sum(np.asarray(grad, np.float64) * direction))
        assert abs(derivative - expected) <= 1e-4 * (abs(expected) + 1), (i, derivative, expected)


def test_oprf_statistic_leaves_out_padded_queries_and_keys():
    from rfa.random_features.estimators.softmax import oprf_statistic

    q, k = normal(0, (2, 5, 3, 4)), normal(1, (2, 7, 3, 4))  # [B, L, H, d], q_len != kv_len
    keep_q, keep_k = np.arange(5) < np.array([[5], [2]]), np.arange(7) >= np.array([[0], [3]])
    head_major = [np.swapaxes(x, 1, 2) for x in (q, k)]  # [B, H, L, d], masks [B, 1, L, 1]
    phi = oprf_statistic(*head_major, keep_q[:, None, :, None], keep_k[:, None, :, None])
    np.testing.assert_allclose(phi[..., 0], references.oprf_statistic(q, k, keep_q, keep_k), rtol=1e-5)


def test_the_rfa_maps_learned_sigma_starts_at_float32_ones_even_with_x64():
    """Its σ is a float32 parameter beside the model's, whatever JAX's default float is."""
    with jax.enable_x64(True):
        sigma = rfa.estimator("rfa").init_learned(2, 16, 4)["sigma"]
    assert sigma.dtype == jnp.float32 and sigma.shape == (2, 1, 4) and bool(jnp.all(sigma == 1.0))
