"""Fourier integral attention against the float64 product formula: outputs and gradients, masks, numerics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

from rfa.attention import fourier_integral_attention

B, L, H, D = 2, 7, 3, 6
Q, K, V = normal(0, (B, L, H, D), 0.5), normal(1, (B, L, H, D), 0.5), normal(2, (B, L, H, D))
KEEP = np.ones((B, L), bool)
KEEP[1, -2:] = False  # the second row's last two keys are padding


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("radius", [1.0, 3.0])
def test_matches_the_product_formula_with_padding_under_jit(is_causal, radius):
    fn = jax.jit(
        lambda q, k, v: fourier_integral_attention(
            q, k, v, radius=radius, mask=KEEP[:, None, None, :], is_causal=is_causal
        )
    )
    expected = references.fourier_integral_attention(Q, K, V, radius, keep_k=KEEP, causal=is_causal)
    np.testing.assert_allclose(fn(Q, K, V), expected, rtol=2e-4, atol=2e-5)


def test_one_radius_per_head_and_cross_lengths():
    radius = np.array([0.5, 1.0, 2.0], np.float32)
    out = fourier_integral_attention(Q[:, :4], K, V, radius=radius[:, None])
    expected = references.fourier_integral_attention(Q[:, :4], K, V, radius)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_gradients_match_the_reference_for_q_k_v_and_the_radius(is_causal):
    G = normal(7, (B, L, H, D))
    mask = KEEP[:, None, None, :]

    def loss(q, k, v, r):
        return jnp.sum(fourier_integral_attention(q, k, v, radius=r[:, None], mask=mask, is_causal=is_causal) * G)

    def reference(q, k, v, r):
        return np.sum(references.fourier_integral_attention(q, k, v, r, keep_k=KEEP, causal=is_causal) * G)

    radius = np.array([0.8, 1.5, 2.5])
    args = (Q, K, V, radius)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(*(jnp.asarray(a, jnp.float32) for a in args))
    for i, grad in enumerate(grads):
        direction = np.random.default_rng(10 + i).standard_normal(np.shape(args[i]))
        expected = references.directional_derivative(reference, args, i, direction)
        got = float(np.sum(np.asarray(grad, np.float64) * direction))
        assert abs(got - expected) <= 2e-3 * abs(expected) + 1e-4, (i, got, expected)


def test_a_query_equal_to_a_key_uses_the_limit_r_and_has_finite_gradients():
    k = Q.copy()  # q_il = k_jl on every coordinate of the diagonal
    out = fourier_integral_attention(Q, k, V, radius=2.0)
    np.testing.assert_allclose(out, references.fourier_integral_attention(Q, k, V, 2.0), rtol=2e-4, atol=2e-5)
    grads = jax.grad(lambda q: jnp.sum(fourier_integral_attention(q, k, V, radius=2.0)))(Q)
    assert bool(jnp.all(jnp.isfinite(grads)))


def test_a_large_head_dimension_and_radius_do_not_underflow_every_weight():
    """Π_l sin(Rδ)/δ over d = 256 coordinates is far below float32's range; the output is still the ratio."""
    q, k, v = normal(3, (1, 5, 1, 256), 2.0), normal(4, (1, 5, 1, 256), 2.0), normal(5, (1, 5, 1, 4))
    out = fourier_integral_attention(q, k, v, radius=5.0)
    expected = references.fourier_integral_attention(q, k, v, 5.0)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-5)


def test_signed_weights_and_a_query_without_keys():
    """Weights are negative where an odd number of factors are (R|δ| > π); a query with no key outputs 0."""
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.array([0.0, 1.0], np.float32).reshape(1, 2, 1, 1)
    v = np.array([1.0, 0.0], np.float32).reshape(1, 2, 1, 1)
    # w = [R, sin(R)/1] with R = 4: sin(4) < 0, so the normalizer is R + sin(R) and the output R / (R + sin R)
    out = fourier_integral_attention(q, k, v, radius=4.0)
    np.testing.assert_allclose(float(out[0, 0, 0, 0]), 4.0 / (4.0 + np.sin(4.0)), rtol=1e-5)
    nothing = fourier_integral_attention(q, k, v, radius=4.0, mask=np.zeros((1, 1, 1, 2), bool))
    assert float(jnp.abs(nothing).max()) == 0.0


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="radius must be > 0"):
        fourier_integral_attention(Q, K, V, radius=0.0)
    with pytest.raises(ValueError, match=r"radius must be broadcastable to \[batch..., q_len, heads, 1\]"):
        fourier_integral_attention(Q, K, V, radius=np.ones(H))
    with pytest.raises(ValueError, match="is_causal=True needs q_len == kv_len"):
        fourier_integral_attention(Q[:, :3], K, V, radius=1.0, is_causal=True)
    with pytest.raises(jax.errors.JaxRuntimeError, match="radius must be > 0"):  # under jit: when it runs
        jax.block_until_ready(jax.jit(lambda r: fourier_integral_attention(Q, K, V, radius=r))(-1.0))
