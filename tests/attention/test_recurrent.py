import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import normal

import rfa
from rfa.attention import init_state, step

B, L, H, D, M = 2, 24, 3, 8, 16
Q, K, V = normal(0, (B, L, H, D)), normal(1, (B, L, H, D)), normal(2, (B, L, H, D))
W = rfa.sample_projection(jax.random.key(0), M, D)
PARAMS = {"gerf": {"A": -0.1}, "oprf": {"phi_sq": 2.0}}


def options(name, **kwargs):
    fm = rfa.feature_map(name)
    return dict(
        feature_map=name, projection=W if fm.needs_projection else None, feature_params=PARAMS.get(name), **kwargs
    )


def decode(name, q, k, v, mask=None, **kwargs):
    """Runs ``step`` over the sequence with ``lax.scan``; returns ``[B, L, H, d_v]``."""
    state = init_state((B,), H, rfa.feature_map(name).num_outputs(M, D), V.shape[-1])
    keep = jnp.ones((q.shape[1], B, 1), jnp.bool_) if mask is None else jnp.moveaxis(mask, 1, 0)[..., None]

    def body(state, inputs):
        q_t, k_t, v_t, keep_t = inputs
        return step(state, q_t, k_t, v_t, mask=keep_t, **options(name, **kwargs))

    _, outs = jax.lax.scan(jax.jit(body), state, (*(jnp.moveaxis(x, 1, 0) for x in (q, k, v)), keep))
    return jnp.moveaxis(outs, 0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trig", "positive", "elu"])  # all maps, renormalized: test_against_references.py
@pytest.mark.parametrize("renormalize", [True, False])
def test_recurrent_equals_causal_parallel_form(name, renormalize):
    q, k = (Q * 0.5, K * 0.5) if not renormalize else (Q, K)
    causal = rfa.kernelized_attention(q, k, V, is_causal=True, chunk_size=5, renormalize=renormalize, **options(name))
    np.testing.assert_allclose(decode(name, q, k, V, renormalize=renormalize), causal, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_masked_tokens_are_left_out_of_the_state():
    keep = np.ones((B, L), bool)
    keep[0, :5] = False  # left padding of the first prompt
    causal = rfa.kernelized_attention(Q, K, V, is_causal=True, mask=keep[:, None, None, :], **options("positive"))
    np.testing.assert_allclose(decode("positive", Q, K, V, mask=jnp.asarray(keep)), causal, rtol=1e-4, atol=1e-5)


def test_one_step_costs_the_same_at_any_position():
    """The state has a fixed size: the same compiled step serves every position."""
    state = init_state((B,), H, M, D)
    jitted = jax.jit(lambda s, q, k, v: step(s, q, k, v, **options("positive")))
    for t in range(3):
        state, _ = jitted(state, Q[:, t], K[:, t], V[:, t])
    assert jitted._cache_size() == 1
    assert state.kv.shape == (B, H, M, D + 1)


@pytest.mark.slow
def test_large_key_rescales_state_without_overflow():
    k = K.copy()
    k[:, 10, :, 0] = 80.0
    out = decode("trig", Q, jnp.asarray(k), V)
    assert bool(jnp.all(jnp.isfinite(out)))
    causal = rfa.kernelized_attention(Q, k, V, is_causal=True, **options("trig"))
    np.testing.assert_allclose(out, causal, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_bf16_in_bf16_out():
    state = init_state((B,), H, M, D)
    tokens = [jnp.asarray(x[:, 0], jnp.bfloat16) for x in (Q, K, V)]
    _, out = step(state, *tokens, **options("positive"))
    assert out.dtype == jnp.bfloat16
    _, exact = step(state, *(t.astype(jnp.float32) for t in tokens), **options("positive"))
    np.testing.assert_allclose(out.astype(jnp.float32), exact, rtol=2**-8)  # one bfloat16 rounding of the output


def test_step_vmap_and_grad():
    state = init_state((), H, rfa.feature_map("hyperbolic").num_outputs(M, D), D)
    fn = jax.jit(lambda q, k, v: step(state, q, k, v, **options("hyperbolic"))[1])
    np.testing.assert_allclose(jax.vmap(fn)(Q[:, 0], K[:, 0], V[:, 0]), decode("hyperbolic", Q, K, V)[:, 0], rtol=1e-5)
    # Gradients through step: test_against_references.py (recurrent mode, every map).


def test_left_out_token_may_hold_non_finite_values():
    keep = np.ones((B, L), bool)
    keep[:, 3] = False
    k, v = K.copy(), V.copy()
    k[:, 3], v[:, 3] = np.inf, np.nan
    out = decode("positive", Q, jnp.asarray(k), jnp.asarray(v), mask=jnp.asarray(keep))
    np.testing.assert_allclose(out, decode("positive", Q, K, V, mask=jnp.asarray(keep)), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trig", "positive", "oprf", "elu"])
def test_prefill_and_attend_equal_bidirectional_cross_attention(name):
    mask = jnp.arange(L)[None, :] < jnp.array([L, L - 7])[:, None]  # [B, L] key padding
    expected = rfa.kernelized_attention(Q[:, :5], K, V, mask=mask[:, None, None, :], **options(name))
    state = jax.jit(lambda k, v, keep: rfa.attention.prefill(k, v, mask=keep, **options(name)))(K, V, mask[..., None])
    read = jax.jit(jax.vmap(lambda q: rfa.attention.attend(state, q, **options(name)), in_axes=1, out_axes=1))
    np.testing.assert_allclose(read(Q[:, :5]), expected, rtol=2e-4, atol=2e-5)


@pytest.mark.slow
def test_prefill_then_step_continues_the_causal_form():
    name, split = "positive", 9
    causal = rfa.kernelized_attention(Q, K, V, is_causal=True, **options(name))
    state = rfa.attention.prefill(K[:, :split], V[:, :split], **options(name))
    outs = []
    for t in range(split, L):
        state, out = step(state, Q[:, t], K[:, t], V[:, t], **options(name))
        outs.append(out)
    np.testing.assert_allclose(jnp.stack(outs, 1), causal[:, split:], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(rfa.attention.attend(state, Q[:, -1], **options(name)), causal[:, -1], rtol=2e-4,
                               atol=2e-5)  # fmt: skip
