"""Decay, states and one-token calls of ``rfa.kernelized_attention`` beyond the reference comparisons.

``test_against_references.py`` holds every mode and map to the float64 reference and to the naive
form; here: decays far outside float32's exp range, large keys under decay, gradients w.r.t. an
initial state, one compiled decoding step at every position, dtypes, and masks under ``jit``.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

import rfa
from rfa.attention import init_state, naive_kernelized_attention

B, L, H, D, M = 2, 24, 3, 8, 16
Q, K, V = normal(0, (B, L, H, D)), normal(1, (B, L, H, D)), normal(2, (B, L, H, D))
W = rfa.sample_projection(jax.random.key(0), M, D)
PARAMS = {"gerf": {"A": -0.1}, "oprf": {"phi_sq": 2.0}}


def options(name, **kwargs):
    fm = rfa.estimator(name)
    return dict(
        estimator=name, projection=W if fm.needs_projection else None, feature_params=PARAMS.get(name), **kwargs
    )


def decode(name, q, k, v, mask=None, log_decay=None, **kwargs):
    """One ``kernelized_attention`` call per token (``lax.scan``), carrying the state; ``[B, L, H, d_v]``."""
    state = init_state((B,), H, rfa.estimator(name).num_outputs(M, D), v.shape[-1])
    keep = jnp.ones((B, q.shape[1]), jnp.bool_) if mask is None else mask
    decay = jnp.zeros(q.shape[:-1]) if log_decay is None else log_decay

    @jax.jit
    def body(state, token):
        q_t, k_t, v_t, keep_t, g_t = (x[:, None] for x in token)
        out, state = rfa.kernelized_attention(
            q_t,
            k_t,
            v_t,
            mask=keep_t[:, None, None],
            is_causal=True,
            log_decay=g_t,
            initial_state=state,
            return_state=True,
            **options(name, **kwargs),
        )
        return state, out[:, 0]

    _, outs = jax.lax.scan(body, state, tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, keep, decay)))
    return jnp.moveaxis(outs, 0, 1)


RESETS = (7, 15)  # tokens whose log-decay is -5000: the state before them is gone, total -1e4


def reset_decay():
    return jnp.zeros((B, L, H)).at[:, list(RESETS)].set(-5000.0)


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
def test_a_total_log_decay_of_minus_1e4_stays_finite_and_exact(form):
    """Decays of -5000 restart the attention: the output equals causal attention over each segment alone."""
    g = reset_decay()
    if form == "chunked":
        fn = jax.jit(
            lambda q, k, v, g: rfa.kernelized_attention(
                q, k, v, is_causal=True, log_decay=g, chunk_size=5, **options("positive")
            )
        )
        out = fn(Q, K, V, g)
    else:
        out = decode("positive", Q, K, V, log_decay=g)
    assert bool(jnp.all(jnp.isfinite(out)))
    bounds = (0, *RESETS, L)
    segments = [
        rfa.kernelized_attention(Q[:, a:b], K[:, a:b], V[:, a:b], is_causal=True, **options("positive"))
        for a, b in itertools.pairwise(bounds)
    ]
    np.testing.assert_allclose(out, jnp.concatenate(segments, axis=1), rtol=2e-5, atol=2e-6)


def test_gradients_stay_finite_under_extreme_decay():
    grads = jax.jit(
        jax.grad(
            lambda g, k: jnp.sum(
                rfa.kernelized_attention(Q, k, V, is_causal=True, log_decay=g, chunk_size=5, **options("positive")) ** 2
            ),
            argnums=(0, 1),
        )
    )(reset_decay(), K)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)


@pytest.mark.parametrize("renormalize", [True, False])
def test_a_large_key_under_decay_rescales_without_overflow(renormalize):
    """A key 80 above the others and strong decays: the per-row stabilizer and the decay combine."""
    k = np.asarray(K).copy()
    k[:, 10, :, 0] = 80.0
    g = -jnp.abs(normal(3, (B, L, H))) * 3
    q = Q * 0.5 if not renormalize else Q
    expected = references.kernelized_attention(
        q, k, V, "positive", W, causal=True, renormalize=renormalize, log_decay=g
    )
    for out in (
        rfa.kernelized_attention(
            q, k, V, is_causal=True, log_decay=g, chunk_size=4, **options("positive", renormalize=renormalize)
        ),
        decode("positive", q, k, V, log_decay=g, renormalize=renormalize),
    ):
        assert bool(jnp.all(jnp.isfinite(out)))
        np.testing.assert_allclose(out / np.max(np.abs(expected)), expected / np.max(np.abs(expected)), atol=2e-5)


def test_gradients_with_respect_to_the_initial_state_equal_the_naive_form():
    """A state from elsewhere (another model, another sequence): d out / d (kv, log_reference)."""
    _, state = rfa.kernelized_attention(
        K[:, :6], K[:, :6], V[:, :6], is_causal=True, return_state=True, **options("positive")
    )
    g = -0.3 * jax.nn.softplus(normal(4, (B, L, H)))
    G = normal(5, (B, L, H, D))

    def loss(fn, kv, log_reference, **kwargs):
        out = fn(
            Q,
            K,
            V,
            is_causal=True,
            log_decay=g,
            initial_state=rfa.attention.RecurrentState(kv, log_reference),
            **options("positive"),
            **kwargs,
        )
        return jnp.sum(out * G)

    grad = jax.jit(jax.grad(lambda kv, r: loss(rfa.kernelized_attention, kv, r, chunk_size=5), argnums=(0, 1)))
    naive_grad = jax.jit(jax.grad(lambda kv, r: loss(naive_kernelized_attention, kv, r), argnums=(0, 1)))
    for a, b in zip(grad(*state), naive_grad(*state), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6 * float(jnp.max(jnp.abs(b))))


def test_one_token_call_compiles_once_for_every_position():
    """The state has a fixed size: the same compiled step serves every position (O(1) decoding)."""
    state = init_state((B,), H, M, D)
    jitted = jax.jit(
        lambda s, q, k, v, g: rfa.kernelized_attention(
            q, k, v, is_causal=True, log_decay=g, initial_state=s, return_state=True, **options("positive")
        )
    )
    for t in range(3):
        _, state = jitted(state, Q[:, t : t + 1], K[:, t : t + 1], V[:, t : t + 1], jnp.full((B, 1, H), -0.1))
    assert jitted._cache_size() == 1
    assert state.kv.shape == (B, H, M, D + 1)


def test_bf16_in_bf16_out_with_a_state():
    tokens = [jnp.asarray(x[:, :1], jnp.bfloat16) for x in (Q, K, V)]
    out, state = rfa.kernelized_attention(*tokens, is_causal=True, return_state=True, **options("positive"))
    assert out.dtype == jnp.bfloat16 and state.kv.dtype == jnp.float32
    exact = rfa.kernelized_attention(*(t.astype(jnp.float32) for t in tokens), is_causal=True, **options("positive"))
    np.testing.assert_allclose(out.astype(jnp.float32), exact, rtol=2**-8)  # one bfloat16 rounding of the output


def test_one_token_calls_vmap():
    fn = jax.jit(lambda q, k, v: rfa.kernelized_attention(q, k, v, is_causal=True, **options("hyperbolic")))
    batched = jax.vmap(fn)(Q[:, None, :1], K[:, None, :1], V[:, None, :1])[:, 0]
    np.testing.assert_allclose(batched, decode("hyperbolic", Q, K, V)[:, :1], rtol=1e-5, atol=1e-6)


def test_left_out_token_may_hold_non_finite_values_and_its_decay_is_skipped():
    keep = np.ones((B, L), bool)
    keep[:, 3] = False
    k, v = np.asarray(K).copy(), np.asarray(V).copy()
    k[:, 3], v[:, 3] = np.inf, np.nan
    g = np.full((B, L, H), -0.2)
    g[:, 3] = -np.inf  # a left-out token's decay is not applied
    out = decode("positive", Q, jnp.asarray(k), jnp.asarray(v), mask=jnp.asarray(keep), log_decay=jnp.asarray(g))
    kept = keep[0]
    expected = rfa.kernelized_attention(
        Q[:, kept], K[:, kept], V[:, kept], is_causal=True, log_decay=jnp.asarray(g)[:, kept], **options("positive")
    )
    np.testing.assert_allclose(out[:, kept], expected, rtol=1e-5, atol=1e-6)


def test_a_traced_causal_mask_returns_the_state():
    """Under jit the mask's pattern is known at run time only: the switch carries the state too."""
    keep = jnp.arange(L)[None, :] >= jnp.array([0, 5])[:, None]
    mask = jnp.tril(jnp.ones((L, L), bool))[None, None] & keep[:, None, None, :]
    g = jnp.full((B, L, H), -0.1)

    def run(mask):
        return rfa.kernelized_attention(
            Q, K, V, mask=mask, log_decay=g, is_causal=True, return_state=True, **options("positive")
        )

    out, state = jax.jit(run)(mask)
    expected, expected_state = run(keep[:, None, None, :])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.value(), expected_state.value(), rtol=1e-5)


def test_a_bidirectional_call_adds_its_keys_to_the_initial_state():
    """Keys split in two calls (the later ones larger, so the references differ) equal one call over all."""
    k = jnp.concatenate([K[:, :10], 3 * K[:, 10:]], axis=1)
    _, state = rfa.kernelized_attention(Q[:, :0], k[:, :10], V[:, :10], return_state=True, **options("positive"))
    out, state = rfa.kernelized_attention(
        Q, k[:, 10:], V[:, 10:], initial_state=state, return_state=True, **options("positive")
    )
    expected, expected_state = rfa.kernelized_attention(Q, k, V, return_state=True, **options("positive"))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.value(), expected_state.value(), rtol=1e-5)
