import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal, tiered

import rfa

B, L, H, D, M = 2, 40, 3, 8, 32
Q, K, V = normal(0, (B, L, H, D)), normal(1, (B, L, H, D)), normal(2, (B, L, H, D))
W = rfa.sample_projection(jax.random.key(0), M, D)
PARAMS = {"gerf": {"A": -0.1}, "oprf": {"phi_sq": 2.0}}
MAPS = ["trig", "positive", "hyperbolic", "gerf", "oprf", "relu", "elu"]


def attend(q, k, v, name="positive", **kwargs):
    fm = rfa.estimator(name)
    kwargs.setdefault("feature_params", PARAMS.get(name))
    return rfa.kernelized_attention(q, k, v, estimator=name, projection=W if fm.needs_projection else None, **kwargs)


def quadratic_reference(q, k, v, name, causal, renormalize=True, params=None):
    """The same estimator with the L×L matrix formed explicitly, in float64 (params in [B, L, H] layout)."""
    fm = rfa.estimator(name)
    scale = D**-0.25 if fm.temperature_scaled else 1.0
    params = PARAMS.get(name, {}) if params is None else params
    projection = W if fm.needs_projection else None
    phi_q = np.asarray(fm(q * scale, projection, **params), np.float64)
    phi_k = np.asarray(fm(k * scale, projection, **params), np.float64)
    a = np.einsum("bqhf,bkhf->bhqk", phi_q, phi_k)
    if causal:
        a = a * np.tril(np.ones((q.shape[1], k.shape[1])))
    num = np.einsum("bhqk,bkhd->bqhd", a, v)
    return num / a.sum(-1).transpose(0, 2, 1)[..., None] if renormalize else num


# Every map against an independent float64 reference, in every mode: test_against_references.py.
# Here the chunking: one token per chunk, chunks that do not divide L, one chunk longer than L; for a
# map with a per-row stabilizer (positive) and one without (trig).
@pytest.mark.parametrize("name", ["positive", "trig"])
@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_causal_equals_masked_quadratic_form(name, chunk_size):
    out = attend(Q, K, V, name, is_causal=True, chunk_size=chunk_size)
    np.testing.assert_allclose(out, quadratic_reference(Q, K, V, name, True), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_per_token_parameters_follow_their_tokens(is_causal):
    """A per token ``[batch, heads, length]``: the causal form lays it out chunk-major, padded tail included."""
    A = -0.2 * jax.random.uniform(jax.random.key(3), (B, H, L))
    out = attend(Q, K, V, "gerf", is_causal=is_causal, chunk_size=7, feature_params={"A": A})
    expected = quadratic_reference(Q, K, V, "gerf", is_causal, params={"A": jnp.swapaxes(A, 1, 2)})
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_extra_batch_axes_with_per_head_parameters(is_causal):
    """``[2, B, L, H, D]`` inputs and one A per head (``[H, 1]``): each leading index is its own problem."""
    A = jnp.array([[-0.2], [0.0], [0.05]])
    q, k, v = (jnp.stack([x, x[::-1]]) for x in (Q, K, V))
    out = jax.jit(lambda q, k, v: attend(q, k, v, "gerf", is_causal=is_causal, chunk_size=7, feature_params={"A": A}))(
        q, k, v
    )
    assert out.shape == q.shape
    for i in range(2):
        expected = quadratic_reference(q[i], k[i], v[i], "gerf", is_causal, params={"A": A[:, 0]})
        np.testing.assert_allclose(out[i], expected, rtol=2e-4, atol=2e-5)


def test_cross_attention_equals_quadratic_form():
    q = Q[:, :9]
    np.testing.assert_allclose(attend(q, K, V), quadratic_reference(q, K, V, "positive", False), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_unnormalized_equals_quadratic_numerator(is_causal):
    q, k = Q * 0.5, K * 0.5
    out = attend(q, k, V, "hyperbolic", is_causal=is_causal, renormalize=False, chunk_size=16)
    np.testing.assert_allclose(out, quadratic_reference(q, k, V, "hyperbolic", is_causal, False), rtol=2e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "is_causal"), [("positive", False), ("oprf", False), ("hyperbolic", True)])
def test_error_falls_as_features_grow(name, is_causal):
    q, k = Q * 0.5, K * 0.5
    exact = rfa.softmax_attention(q, k, V, is_causal=is_causal)
    errors = []
    for m in (8, 64, 512, 4096):
        projection = rfa.sample_projection(jax.random.key(m), m, D)
        out = rfa.kernelized_attention(q, k, V, estimator=name, projection=projection, is_causal=is_causal)
        errors.append(float(jnp.mean((out - exact) ** 2)))
    assert errors == sorted(errors, reverse=True), errors
    assert errors[-1] < errors[0] / 50, errors


def test_unnormalized_approaches_exact_numerator():
    q, k = Q * 0.5, K * 0.5
    projection = rfa.sample_projection(jax.random.key(1), 8192, D)
    out = rfa.kernelized_attention(q, k, V, estimator="positive", projection=projection, renormalize=False)
    num, _ = rfa.unnormalized_softmax_attention(q, k, V)
    assert float(jnp.linalg.norm(out - num) / jnp.linalg.norm(num)) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", ["positive", "oprf"])  # oprf: its statistic must see only the kept tokens
@pytest.mark.parametrize("is_causal", [False, True])
def test_padded_batch_equals_truncated_sequences(name, is_causal):
    lengths = [L, 23]
    keep = np.arange(L)[None, :] < np.array(lengths)[:, None]
    params = {"phi_sq": 2.0} if name == "oprf" and is_causal else None
    padded = attend(Q, K, V, name, mask=keep[:, None, None, :], is_causal=is_causal, feature_params=params)
    for b, n in enumerate(lengths):
        alone = attend(
            Q[b : b + 1, :n], K[b : b + 1, :n], V[b : b + 1, :n], name, is_causal=is_causal, feature_params=params
        )
        np.testing.assert_allclose(padded[b : b + 1, :n], alone, rtol=1e-5, atol=1e-6)


def test_padding_values_do_not_leak():
    """Huge values in padded positions change nothing: their features are zeroed, not just their values."""
    keep = np.arange(L) < 30
    k, v = K.copy(), V.copy()
    k[:, 30:], v[:, 30:] = 50.0, 1e6
    out = attend(Q, k, v, mask=keep)
    np.testing.assert_allclose(out, attend(Q, K, V, mask=keep), rtol=1e-5, atol=1e-6)


def test_all_keys_masked_gives_zero():
    out = attend(Q, K, V, mask=jnp.zeros((L,), jnp.bool_))
    assert float(jnp.abs(out).max()) == 0.0


@pytest.mark.slow
def test_per_head_key_mask():
    keep = np.ones((1, H, 1, L), bool)
    keep[0, 1, 0, 20:] = False
    out = attend(Q, K, V, mask=keep)
    truncated = attend(Q[:, :, 1:2], K[:, :20, 1:2], V[:, :20, 1:2])[:, :, 0]
    np.testing.assert_allclose(out[:, :, 1], truncated, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, :, 0], attend(Q, K, V)[:, :, 0], rtol=1e-6)


def test_oprf_default_statistic_is_mean_based():
    scale = D**-0.25
    q, k = Q * scale, K * scale
    phi_sq = np.mean(np.sum(q * q, -1), 1) + np.mean(np.sum(k * k, -1), 1) + 2 * np.sum(q.mean(1) * k.mean(1), -1)
    phi_sq = phi_sq[:, :, None]  # one value per batch and head, broadcast over [batch, heads, length]
    default = rfa.kernelized_attention(Q, K, V, estimator="oprf", projection=W)
    explicit = rfa.kernelized_attention(Q, K, V, estimator="oprf", projection=W, feature_params={"phi_sq": phi_sq})
    np.testing.assert_allclose(default, explicit, rtol=1e-5, atol=1e-6)


# Measured float32 computation error of each map at these inputs, in units of float32's eps times the
# largest output (trig's normalizer nearly cancels, so its error is ~1000x the others'; measured: 7.5,
# and for trig 1000 with XLA's default optimisation level, 2200 at level 0, which the suite uses:
# tests/conftest.py). The tolerance below doubles it and adds one ulp of the output's dtype for
# rounding the output (measured: at most half an ulp in bfloat16 and float16).
COMPUTATION_ERROR = {"trig": 2200.0}
DEFAULT_COMPUTATION_ERROR = 8.0


@pytest.mark.parametrize("name", tiered(MAPS, {"trig", "positive"}))
@pytest.mark.parametrize("is_causal", [False, True])
def test_inputs_with_norm_10_in_low_precision_equal_the_reference(name, is_causal):
    """Norms up to 10 after the d^-1/4 temperature (exponents up to ~exp(±100) without the stabilizer)."""
    directions = Q / np.linalg.norm(Q, axis=-1, keepdims=True), K / np.linalg.norm(K, axis=-1, keepdims=True)
    norms = np.linspace(0.1, 10.0, L)[None, :, None, None] * D**0.25
    fm = rfa.estimator(name)
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
        q, k, v = (jnp.asarray(x, dtype) for x in (directions[0] * norms, directions[1] * norms, V))
        out = attend(q, k, v, name, is_causal=is_causal)
        assert out.dtype == dtype
        # The reference sees the same rounded inputs: what is measured is rfa's computation, not the rounding.
        expected = references.kernelized_attention(
            *(np.asarray(x.astype(jnp.float32)) for x in (q, k, v)),
            name,
            W if fm.needs_projection else None,
            causal=is_causal,
            **PARAMS.get(name, {}),
        )
        eps32 = float(jnp.finfo(jnp.float32).eps)
        computation = 2 * COMPUTATION_ERROR.get(name, DEFAULT_COMPUTATION_ERROR) * eps32 * np.abs(expected).max()
        rounding = float(jnp.finfo(dtype).eps) * np.abs(expected)
        np.testing.assert_array_less(np.abs(np.asarray(out.astype(jnp.float32)) - expected), computation + rounding)


@pytest.mark.slow
def test_large_future_key_does_not_wipe_out_earlier_ones():
    """The causal reference is a running maximum: a key 300 nats larger later on leaves early rows intact."""
    k = K * 0.3
    k[:, -1] *= 0.0
    k[:, -1, :, 0] = 60.0
    causal = attend(Q, k, V, "trig", is_causal=True, chunk_size=8)
    np.testing.assert_allclose(
        causal[:, :-8], attend(Q[:, :-8], k[:, :-8], V[:, :-8], "trig", is_causal=True), rtol=1e-4, atol=1e-6
    )


@pytest.mark.parametrize("is_causal", [False, True])
def test_vmap_over_the_batch_equals_the_batched_call(is_causal):
    """Gradients of every map and mode are held to the reference in test_against_references.py."""
    fn = jax.jit(lambda q, k, v: attend(q, k, v, "hyperbolic", is_causal=is_causal, chunk_size=16))
    np.testing.assert_allclose(jax.vmap(fn)(Q, K, V), fn(Q, K, V), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_causal_gradient_equals_quadratic_gradient():
    def loss(fn):
        return lambda q, k: jnp.sum(jnp.sin(fn(q, k)))

    chunked = jax.grad(loss(lambda q, k: attend(q, k, V, is_causal=True, chunk_size=8)), argnums=(0, 1))(Q, K)
    dense = jax.grad(loss(lambda q, k: _dense_positive(q, k, V)), argnums=(0, 1))(Q, K)
    for a, b in zip(chunked, dense, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def _dense_positive(q, k, v):
    phi = rfa.estimator("positive")
    a = jnp.einsum("bqhf,bkhf->bhqk", phi(q * D**-0.25, W), phi(k * D**-0.25, W)) * jnp.tril(jnp.ones((L, L)))
    return jnp.einsum("bhqk,bkhd->bqhd", a, v) / jnp.sum(a, -1).transpose(0, 2, 1)[..., None]


def _fwd_bwd_bytes(length, is_causal):
    shape = (1, length, 2, 16)
    x = jnp.zeros(shape, jnp.float32)
    projection = rfa.sample_projection(jax.random.key(0), 64, 16)

    def loss(q, k, v):
        out = rfa.kernelized_attention(q, k, v, estimator="positive", projection=projection, is_causal=is_causal)
        return jnp.sum(out**2)

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(x, x, x).compile()
    return compiled.memory_analysis().temp_size_in_bytes


@pytest.mark.slow
@pytest.mark.parametrize("is_causal", [False, True])
def test_forward_backward_memory_is_linear_in_length(is_causal):
    small, large = _fwd_bwd_bytes(1024, is_causal), _fwd_bwd_bytes(8192, is_causal)
    assert large / small < 8 * 1.25, (small, large)  # 8x the tokens; quadratic would be 64x


@pytest.mark.slow
def test_large_key_in_a_padded_last_chunk_keeps_gradients_right():
    """L % chunk != 0: the padded tail carries the running maximum, so no exponent turns positive."""
    q, k, v = Q[:, :5] * 0.3, K[:, :5] * 0.3, V[:, :5]
    k[:, 3, :, 0] = 20.0  # s = |k|²/2 ≈ 100 for trig after the temperature: e^100 without the stabilizer
    G = normal(11, v.shape)
    grad = jax.grad(lambda k: jnp.sum(attend(q, k, v, "trig", is_causal=True, chunk_size=4) * G))(k)
    direction = normal(12, k.shape)

    def reference(k):
        return np.sum(references.kernelized_attention(q, k, v, "trig", W, causal=True) * G)

    expected = references.directional_derivative(reference, (k,), 0, direction)
    assert abs(float(np.sum(np.asarray(grad, np.float64) * direction)) - expected) <= 1e-3 * abs(expected) + 1e-5


@pytest.mark.slow
def test_fully_masked_leading_chunk_with_small_keys_stays_finite():
    """Left padding filling whole chunks: "no key yet" is the lowest float, not 0, so no decay overflows."""
    keep = np.arange(L) >= 6
    k = np.full_like(K, -12.0)
    out = attend(Q, k, V, is_causal=True, chunk_size=2, mask=keep)
    assert bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_allclose(out[:, 6:], attend(Q[:, 6:], k[:, 6:], V[:, 6:], is_causal=True), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("name", "is_causal"), [("oprf", False), ("positive", True), ("trig", False)])
def test_non_finite_padding_is_ignored(name, is_causal):
    keep = np.arange(L) < 30
    k, v = K.copy(), V.copy()
    k[:, 35], v[:, 31] = np.inf, np.nan
    params = {"phi_sq": 2.0} if name == "oprf" and is_causal else None
    out = attend(Q, k, v, name, mask=keep, is_causal=is_causal, feature_params=params)
    expected = attend(Q, K, V, name, mask=keep, is_causal=is_causal, feature_params=params)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
