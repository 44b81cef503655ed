"""Linformer's attention (rfa.attention.linformer) against a plain loop over batch rows and heads, with its
gradients, and the model core that uses it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rfa import InputError
from rfa.attention.linformer import linformer_attention, project_keys_values

B, L, N, H, D, K = 2, 5, 7, 3, 4, 2  # batch, length, the projections' longest length n, heads, head_dim, k


def reference(q, k, v, E, F, keep):
    """softmax(Q (E K)ᵀ/√d) F V, one batch row and head at a time, padded keys and values zeroed."""
    out = np.zeros(q.shape)
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            projected_k = E[:, : k.shape[1]] @ (k[b, :, h] * keep[b][:, None])
            projected_v = F[:, : v.shape[1]] @ (v[b, :, h] * keep[b][:, None])
            logits = q[b, :, h] @ projected_k.T / np.sqrt(q.shape[-1])
            weights = np.exp(logits - logits.max(axis=1, keepdims=True))
            out[b, :, h] = (weights / weights.sum(axis=1, keepdims=True)) @ projected_v
    return out


def inputs():
    keys = jax.random.split(jax.random.key(0), 5)
    q, k, v = (jax.random.normal(key, (B, L, H, D), jnp.float32) for key in keys[:3])
    E, F = (jax.random.normal(key, (K, N), jnp.float32) / np.sqrt(N) for key in keys[3:])
    keep = jnp.array([[True, True, True, False, False], [True] * L])
    return q, k, v, E, F, keep


def test_linformer_attention_is_the_papers_formula_with_padded_keys_zeroed():
    """Values against the loop (float64 NumPy), gradients against the formula's own jnp einsums (float32, the
    precision of rfa's softmax)."""
    q, k, v, E, F, keep = inputs()
    out = jax.jit(linformer_attention)(q, k, v, E, F, key_mask=keep)
    np.testing.assert_allclose(out, reference(*(np.asarray(x, np.float64) for x in (q, k, v, E, F, keep))), atol=2e-6)
    argnums = (0, 1, 2, 3, 4)
    grads = jax.grad(lambda *a: jnp.sum(jnp.sin(linformer_attention(*a, key_mask=keep))), argnums)(q, k, v, E, F)
    wanted = jax.grad(lambda *a: jnp.sum(jnp.sin(_jax_reference(*a, keep))), argnums)(q, k, v, E, F)
    for got, want in zip(grads, wanted, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def _jax_reference(q, k, v, E, F, keep):
    """The reference's formula in jnp, for its gradients: one einsum per step, no shared code with the library."""
    zeroed = keep[:, :, None, None]
    projected_k = jnp.einsum("nl,blhd->bnhd", E[:, : k.shape[1]], jnp.where(zeroed, k, 0))
    projected_v = jnp.einsum("nl,blhd->bnhd", F[:, : v.shape[1]], jnp.where(zeroed, v, 0))
    weights = jax.nn.softmax(jnp.einsum("bqhd,bnhd->bhqn", q, projected_k) / np.sqrt(q.shape[-1]), axis=-1)
    return jnp.einsum("bhqn,bnhd->bqhd", weights, projected_v)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (lambda q, k, v, E, F: (q, k, v, E[:, :4], F[:, :4]), "n >= kv_len = 5"),
        (lambda q, k, v, E, F: (q, k, v, E, F[:1]), "must have one shape"),
        (lambda q, k, v, E, F: (q, k, v[..., :2], E, F), "one shape"),
    ],
)
def test_wrong_shapes_say_what_is_wrong(args, says):
    q, k, v, E, F, _ = inputs()
    with pytest.raises(InputError, match=says):
        linformer_attention(*args(q, k, v, E, F))


def test_a_key_mask_of_the_wrong_shape_is_refused():
    _, k, v, E, F, keep = inputs()
    with pytest.raises(InputError, match="key_mask must be"):
        project_keys_values(k, v, E, F, keep[:, :3])
