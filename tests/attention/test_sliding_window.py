"""Sliding-window attention (``rfa.attention.sliding_window_attention``) equals exact softmax attention under the
dense window mask, written here from its definition and computed by the float64 reference, in outputs and
gradients, causal and bidirectional, for windows that divide the length, do not, and exceed it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

from rfa.attention import sliding_window_attention

B, L, H, D = 2, 11, 2, 4
Q, K, V = normal(0, (B, L, H, D)), normal(1, (B, L, H, D)), normal(2, (B, L, H, D))
KEEP = np.arange(L)[None] >= np.array([[0], [3]])  # the second sequence left-padded
WEIGHTS = normal(3, (B, L, H, D))


def window_mask(window, causal):
    """``[L, L]``: key j is in query i's window (causal: ``i − w < j ≤ i``; bidirectional: ``|i − j| < w``)."""
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    return (i - j >= 0) & (i - j < window) if causal else np.abs(i - j) < window


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("window", [1, 3, 4, 11, 16])
def test_equals_exact_attention_under_the_dense_window_mask(window, causal):
    def loss(q, k, v):
        out = sliding_window_attention(q, k, v, window=window, is_causal=causal, mask=KEEP[:, None, None, :])
        return jnp.sum(out * WEIGHTS), out

    (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(Q, K, V)
    allowed = window_mask(window, causal)
    expected = references.softmax_attention(Q, K, V, keep_k=KEEP, allowed_pairs=allowed)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)

    def reference_loss(q, k, v):
        return np.sum(references.softmax_attention(q, k, v, keep_k=KEEP, allowed_pairs=allowed) * WEIGHTS)

    rng = np.random.default_rng(4)
    for i, arg in enumerate((Q, K, V)):
        direction = rng.standard_normal(arg.shape)
        expected_derivative = references.directional_derivative(reference_loss, (Q, K, V), i, direction)
        derivative = float(np.sum(np.asarray(grads[i], np.float64) * direction))
        assert abs(derivative - expected_derivative) <= 1e-4 * np.linalg.norm(grads[i]) * np.linalg.norm(direction)


def test_a_dense_mask_or_no_window_is_refused():
    with pytest.raises(ValueError, match=r"takes key padding as its mask, broadcastable to \[batch..., heads, 1, L\]"):
        sliding_window_attention(Q, K, V, window=3, mask=jnp.ones((L, L), bool))
    with pytest.raises(ValueError, match="window must be >= 1"):
        sliding_window_attention(Q, K, V, window=0)
