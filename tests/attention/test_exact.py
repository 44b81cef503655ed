import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

import rfa

B, L, H, D = 2, 12, 3, 8
Q, K, V = normal(0, (B, L, H, D)), normal(1, (B, L, H, D)), normal(2, (B, L, H, D))


@pytest.mark.slow
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_jax_dot_product_attention(is_causal):
    out = rfa.softmax_attention(Q, K, V, is_causal=is_causal)
    np.testing.assert_allclose(out, jax.nn.dot_product_attention(Q, K, V, is_causal=is_causal), rtol=1e-5, atol=1e-6)


def test_mask_matches_jax_dot_product_attention():
    mask = np.random.default_rng(0).random((B, 1, L, L)) < 0.7
    mask[..., 0] = True  # every query attends to something
    out = rfa.softmax_attention(Q, K, V, mask=mask)
    np.testing.assert_allclose(out, jax.nn.dot_product_attention(Q, K, V, mask=mask), rtol=1e-5, atol=1e-6)


def test_cross_attention_lengths():
    out = rfa.softmax_attention(Q[:, :5], K, V)
    assert out.shape == (B, 5, H, D)


@pytest.mark.parametrize("is_causal", [False, True])
def test_unnormalized_pieces_renormalize_to_attention(is_causal):
    num, den = rfa.unnormalized_softmax_attention(Q, K, V, is_causal=is_causal)
    logits = np.einsum("bqhd,bkhd->bhqk", Q, K) / np.sqrt(D)
    a = np.exp(logits) * (np.tril(np.ones((L, L))) if is_causal else 1.0)
    np.testing.assert_allclose(den, a.sum(-1).transpose(0, 2, 1), rtol=1e-5)
    np.testing.assert_allclose(num, np.einsum("bhqk,bkhd->bqhd", a, V), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        rfa.renormalize(num, den), rfa.softmax_attention(Q, K, V, is_causal=is_causal), rtol=1e-5, atol=1e-6
    )


def test_query_without_keys_outputs_zero():
    mask = jnp.zeros((L,), jnp.bool_)
    assert float(jnp.abs(rfa.softmax_attention(Q, K, V, mask=mask)).max()) == 0.0


def test_bf16_in_bf16_out():
    out = rfa.softmax_attention(*(jnp.asarray(x, jnp.bfloat16) for x in (Q, K, V)))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(out.astype(jnp.float32), rfa.softmax_attention(Q, K, V), atol=0.05)


def test_jit_vmap_grad():
    fn = jax.jit(lambda q, k, v: rfa.softmax_attention(q, k, v, is_causal=True))
    np.testing.assert_allclose(jax.vmap(fn)(Q, K, V), fn(Q, K, V), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fn(Q, K, V), references.softmax_attention(Q, K, V, causal=True), rtol=1e-4, atol=1e-5)
    G = np.random.default_rng(7).standard_normal(Q.shape)
    grads = jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v) * G), argnums=(0, 1, 2))(Q, K, V)

    def reference(q, k, v):
        return np.sum(references.softmax_attention(q, k, v, causal=True) * G)

    for i, grad in enumerate(grads):  # directional derivatives against central differences of the reference
        direction = np.random.default_rng(8 + i).standard_normal(Q.shape)
        expected = references.directional_derivative(reference, (Q, K, V), i, direction)
        assert abs(float(np.sum(np.asarray(grad, np.float64) * direction)) - expected) <= 1e-3 * abs(expected) + 1e-5


def test_logits_beyond_exp_range_are_max_stabilized():
    # logits of a few hundred overflow exp in float32: without the max-subtraction of each row the output is NaN
    q, k = 20.0 * Q, 20.0 * K
    np.testing.assert_allclose(rfa.softmax_attention(q, k, V), references.softmax_attention(q, k, V), atol=1e-4)
