"""Kernelized attention with a relative positional bias (Luo et al., NeurIPS 2021), by FFT: outputs and gradients
against the float64 reference and the naive form, bidirectional and causal with padding; round-off; bad input."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal, tiered

import rfa
from rfa.attention import naive_kernelized_attention
from rfa.attention.kernelized import relative as relative_mode

B, L, H, D, M = 2, 11, 2, 8, 16
Q, K, V = normal(1, (B, L, H, D), 0.5), normal(2, (B, L, H, D), 0.5), normal(3, (B, L, H, D))
BIAS = normal(4, (H, 2 * L - 1))
KEEP = np.array([[1] * L, [1] * 7 + [0] * 4], bool)  # the second row is padded at the end
W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D))
MAPS = {"positive": None, "elu": None, "taylor": None, "oprf": {"phi_sq": 2.0 * D**0.5}}


@pytest.fixture(params=["dense", "fft"])
def sums(request, monkeypatch):
    """Which form computes the Toeplitz sums at this test's short length: the L × L weights (what the library does
    below ``FFT_FROM_LENGTH``) or the FFT (forced here; it is what longer sequences run)."""
    monkeypatch.setattr(relative_mode, "FFT_FROM_LENGTH", 0 if request.param == "fft" else 10**9)
    relative_mode.relative.clear_cache()  # the mode's traces of the other form must not be reused
    yield request.param
    relative_mode.relative.clear_cache()


@functools.cache
def compiled(name, is_causal, sums):
    def loss(q, k, v, w, b, g):
        out = rfa.kernelized_attention(
            q,
            k,
            v,
            estimator=name,
            projection=w if rfa.estimator(name).needs_projection else None,
            feature_params=MAPS[name],
            mask=KEEP[:, None, None, :],
            is_causal=is_causal,
            relative_bias=b,
        )
        return jnp.sum(out * g), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4), has_aux=True))


def reference(name, is_causal, q, k, v, w, b):
    return references.kernelized_attention(
        q,
        k,
        v,
        name,
        w if rfa.estimator(name).needs_projection else None,
        keep_k=KEEP,
        causal=is_causal,
        relative_bias=b,
        **(MAPS[name] or {}),
    )


@pytest.mark.parametrize("is_causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("name", tiered(list(MAPS), {"positive"}))  # the fast tier: positive features
def test_outputs_and_gradients_equal_the_float64_reference(name, is_causal, sums):
    G = normal(5, (B, L, H, D))
    args = (Q, K, V, W, BIAS)
    (_, out), grads = compiled(name, is_causal, sums)(*args, G)
    expected = reference(name, is_causal, *args)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)
    w = W if rfa.estimator(name).needs_projection else None
    naive = naive_kernelized_attention(
        Q,
        K,
        V,
        estimator=name,
        projection=w,
        feature_params=MAPS[name],
        mask=KEEP[:, None, None, :],
        is_causal=is_causal,
        relative_bias=BIAS,
    )
    np.testing.assert_allclose(out, naive, rtol=2e-4, atol=2e-5)

    def loss64(*xs):
        return np.sum(reference(name, is_causal, *xs) * G)

    wrt = range(5) if rfa.estimator(name).needs_projection else (0, 1, 2, 4)
    for i in wrt:  # directional derivatives against central differences of the reference (W and b included)
        direction = np.random.default_rng(20 + i).standard_normal(np.shape(args[i]))
        expected_d = references.directional_derivative(loss64, args, i, direction)
        got = float(np.sum(np.asarray(grads[i], np.float64) * direction))
        assert abs(got - expected_d) <= 2e-3 * abs(expected_d) + 2e-4, (i, got, expected_d)


def test_a_bias_that_vanishes_is_plain_kernelized_attention_and_a_constant_cancels():
    for is_causal in (False, True):
        plain = rfa.kernelized_attention(Q, K, V, estimator="positive", projection=W, is_causal=is_causal)
        for b in (np.zeros((1, 2 * L - 1)), np.full((H, 2 * L - 1), 7.0)):
            out = rfa.kernelized_attention(
                Q, K, V, estimator="positive", projection=W, is_causal=is_causal, relative_bias=b
            )
            np.testing.assert_allclose(out, plain, rtol=1e-5, atol=1e-6)


def test_unnormalized_output_keeps_the_bias_scale():
    """renormalize=False returns Σ_j exp(b_{i-j}) φ(q_i)ᵀφ(k_j) v_j itself: the stabilizers are multiplied back."""
    b = BIAS + 3.0
    out = rfa.kernelized_attention(Q, K, V, estimator="positive", projection=W, relative_bias=b, renormalize=False)
    expected = references.kernelized_attention(Q, K, V, "positive", W, relative_bias=b, renormalize=False)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sums", ["fft", "dense"], indirect=True)
def test_fft_round_off_is_relative_to_the_largest_sum(sums):
    """A bias spread of 20 nats: by FFT, the queries that see their keys only through the small weights are
    accurate to ~1e-7·e^20 relative (the module docstring's warning, measured); the L × L form keeps them."""
    length = 64
    q, k, v = normal(6, (1, length, 1, D), 0.5), normal(7, (1, length, 1, D), 0.5), normal(8, (1, length, 1, 1))
    b = np.where(np.arange(2 * length - 1) - (length - 1) >= 32, 0.0, -20.0)[None]  # lag >= 32: weight 1, else e^-20
    out = np.asarray(
        rfa.kernelized_attention(q, k, v, estimator="elu", projection=None, relative_bias=b, is_causal=True)
    )
    expected = references.kernelized_attention(q, k, v, "elu", causal=True, relative_bias=b)
    error = np.abs(out - expected)[0, :, 0, 0]
    assert np.max(error[32:]) < 1e-4  # queries that see a key at weight 1
    if sums == "fft":
        assert np.max(error[:32]) > 1e-3  # the first 32 see only e^-20-weighted keys: digits lost
    else:
        assert np.max(error[:32] / np.abs(expected[0, :32, 0, 0]).clip(1e-3)) < 1e-3  # each sum kept to itself


def test_bad_input_is_a_clear_error():
    options = dict(estimator="positive", projection=W)
    with pytest.raises(ValueError, match=r"relative_bias must have shape \[heads or 1, 2L - 1\] = \[2, 21\]"):
        rfa.kernelized_attention(Q, K, V, relative_bias=np.zeros((H, L)), **options)
    with pytest.raises(ValueError, match="relative_bias needs q_len == kv_len"):
        rfa.kernelized_attention(Q[:, :4], K, V, relative_bias=BIAS, **options)
    with pytest.raises(ValueError, match="relative_bias cannot be combined with a recurrent state"):
        rfa.kernelized_attention(Q, K, V, relative_bias=BIAS, is_causal=True, return_state=True, **options)
    with pytest.raises(ValueError, match="relative_bias cannot be combined with log_decay"):
        rfa.kernelized_attention(Q, K, V, relative_bias=BIAS, is_causal=True, log_decay=-np.ones((B, L, H)), **options)
