"""One decay per feature (gated linear attention; Yang et al., ICML 2024): the chunked, recurrent and continued
causal forms against the float64 reference, outputs, states and gradients with padding; extreme decay; bad input.
(Sequence-parallel with a per-feature decay: tests/attention/test_sequence_parallel.py.)"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal, tiered

import rfa
from rfa.attention import init_state, naive_kernelized_attention

B, L, H, D, M = 2, 11, 2, 8, 16
Q, K, V = normal(1, (B, L, H, D), 0.5), normal(2, (B, L, H, D), 0.5), normal(3, (B, L, H, D))
KEEP = np.array([[0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1], [1] * L], bool)  # left padding and a hole
W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D))
MAPS = {"positive": M, "elu": D}  # the map and its feature count F


def decays(name):
    """``[B, L, H, F]`` log-decays in (-1.5, 0): each feature forgets at its own rate."""
    return np.asarray(-1.5 * jax.nn.sigmoid(normal(4, (B, L, H, MAPS[name]), 2.0)), np.float32)


def projection(name):
    return W if rfa.estimator(name).needs_projection else None


def run(name, form, q, k, v, g):
    """``(output, state)`` of the causal ``form``: chunked (chunks of 4), recurrent (one token per call) or
    continued (chunked, then two tokens one by one, then chunked from the state)."""
    options = dict(estimator=name, projection=projection(name), is_causal=True, return_state=True)
    mask = KEEP[:, None, None, :]

    def part(state, start, stop, chunk_size=4):
        return rfa.kernelized_attention(
            q[:, start:stop],
            k[:, start:stop],
            v[:, start:stop],
            mask=mask[..., start:stop],
            log_decay=g[:, start:stop],
            chunk_size=chunk_size,
            initial_state=state,
            **options,
        )

    if form == "chunked":
        return part(None, 0, L)
    state = init_state((B,), H, MAPS[name], D)
    splits = [(t, t + 1) for t in range(L)] if form == "recurrent" else [(0, 5), (5, 6), (6, 7), (7, L)]
    outs = []
    for start, stop in splits:
        out, state = part(state, start, stop, chunk_size=3)
        outs.append(out)
    return jnp.concatenate(outs, axis=1), state


@functools.cache
def compiled(name, form):
    def loss(q, k, v, g, G):
        out, state = run(name, form, q, k, v, g)
        return jnp.sum(out * G), (out, state)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True))


@pytest.mark.parametrize(  # the fast tier: every form of positive features, one of elu+1's
    "name, form",
    tiered(
        [(n, f) for n in MAPS for f in ("chunked", "recurrent", "continued")],
        {("positive", "chunked"), ("positive", "recurrent"), ("positive", "continued"), ("elu", "chunked")},
        ids=[f"{n}-{f}" for n in MAPS for f in ("chunked", "recurrent", "continued")],
    ),
)
def test_outputs_states_and_gradients_equal_the_float64_reference(name, form):
    g, G = decays(name), normal(5, (B, L, H, D))
    (_, (out, state)), grads = compiled(name, form)(Q, K, V, g, G)
    args = (Q, K, V, g)

    def reference(q, k, v, g):
        return references.kernelized_attention(q, k, v, name, projection(name), keep_k=KEEP, causal=True, log_decay=g)

    np.testing.assert_allclose(out, reference(*args), rtol=2e-4, atol=2e-5)
    _, naive_state = naive_kernelized_attention(
        Q,
        K,
        V,
        estimator=name,
        projection=projection(name),
        mask=KEEP[:, None, None, :],
        is_causal=True,
        log_decay=g,
        return_state=True,
    )
    np.testing.assert_allclose(state.value(), naive_state.value(), rtol=2e-4, atol=2e-5)
    for i in range(4):  # directional derivatives against central differences of the reference (the decays too)
        direction = np.random.default_rng(30 + i).standard_normal(np.shape(args[i]))
        expected = references.directional_derivative(lambda *xs: np.sum(reference(*xs) * G), args, i, direction)
        got = float(np.sum(np.asarray(grads[i], np.float64) * direction))
        assert abs(got - expected) <= 2e-3 * abs(expected) + 2e-4, (i, got, expected)


def test_one_decay_repeated_over_the_features_is_the_per_token_decay():
    g = decays("positive")[..., :1]
    per_token = rfa.kernelized_attention(
        Q, K, V, estimator="positive", projection=W, is_causal=True, log_decay=g[..., 0], chunk_size=4
    )
    per_feature = rfa.kernelized_attention(
        Q, K, V, estimator="positive", projection=W, is_causal=True, log_decay=np.repeat(g, M, axis=-1), chunk_size=4
    )
    np.testing.assert_allclose(per_feature, per_token, rtol=1e-5, atol=1e-6)


def test_a_feature_that_forgets_at_once_leaves_the_others_intact():
    """Features decayed by -1e4 per token drop out of every earlier key's weight; the rest keep theirs: the output
    is the reference's, finite, with a total log-decay of -1e5 on the decayed features."""
    g = np.zeros((B, L, H, M), np.float32)
    g[..., : M // 2] = -1e4
    out = rfa.kernelized_attention(
        Q,
        K,
        V,
        estimator="positive",
        projection=W,
        is_causal=True,
        log_decay=g,
        mask=KEEP[:, None, None, :],
        chunk_size=4,
    )
    expected = references.kernelized_attention(Q, K, V, "positive", W, keep_k=KEEP, causal=True, log_decay=g)
    assert bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)


def test_bad_input_is_a_clear_error():
    options = dict(estimator="positive", projection=W, is_causal=True)
    with pytest.raises(ValueError, match=r"log_decay has 5 decays per token and head .* gives F = 16 features"):
        rfa.kernelized_attention(Q, K, V, log_decay=-np.ones((B, L, H, 5), np.float32), **options)
    with pytest.raises(ValueError, match=r"log_decay must be broadcastable to \[batch..., q_len, heads, F\]"):
        rfa.kernelized_attention(Q, K, V, log_decay=-np.ones((B, L + 1, H, M), np.float32), **options)
    with pytest.raises(ValueError, match="log_decay must be <= 0"):
        rfa.kernelized_attention(Q, K, V, log_decay=np.ones((B, L, H, M), np.float32), **options)


LONG = 70  # not a multiple of any chunk size below


def strong_decays(name):
    """``[B, LONG, H, F]`` log-decays from -1e-3 to -300 per token and feature: some features keep their keys over
    many sub-chunks of 8 tokens, others forget them at once."""
    log_rate = np.log(1e-3) + (np.log(300.0) - np.log(1e-3)) * np.random.default_rng(6).random((B, LONG, H, MAPS[name]))
    return -np.exp(log_rate).astype(np.float32)


@functools.cache
def compiled_long(name, chunk_size):
    def loss(q, k, v, g, G):
        out = rfa.kernelized_attention(
            q, k, v, estimator=name, projection=projection(name), is_causal=True, log_decay=g, chunk_size=chunk_size
        )
        return jnp.sum(out * G), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 3), has_aux=True))


@pytest.mark.parametrize(
    "name, chunk_size", tiered([(n, c) for n in MAPS for c in (16, 20, 48, 64)], {("positive", 48)})
)
def test_secondary_chunking_with_strong_decays_equals_the_float64_reference_in_values_and_gradients(name, chunk_size):
    """Chunks of 16 to 64 tokens, sub-chunks of 8 (chunk 20 ends in a partial sub-chunk), L = 70: the matmuls
    between sub-chunks and the per-feature decays on the diagonal ones. Values and gradients (queries and decays)
    equal the float64 reference, finite with log-decays down to -300 per token and feature."""
    q, k, v = (normal(i, (B, LONG, H, D), 0.5) for i in (7, 8, 9))
    g, G = strong_decays(name), normal(10, (B, LONG, H, D))
    (_, out), grads = compiled_long(name, chunk_size)(q, k, v, g, G)

    def reference(q, g):
        return references.kernelized_attention(q, k, v, name, projection(name), causal=True, log_decay=g)

    np.testing.assert_allclose(out, reference(q, g), rtol=2e-4, atol=2e-5)
    for i, (arg, grad) in enumerate(zip((q, g), grads, strict=True)):
        assert bool(jnp.all(jnp.isfinite(grad)))
        direction = np.random.default_rng(40 + i).standard_normal(np.shape(arg))
        expected = references.directional_derivative(lambda *xs: np.sum(reference(*xs) * G), (q, g), i, direction)
        got = float(np.sum(np.asarray(grad, np.float64) * direction))
        assert abs(got - expected) <= 2e-3 * abs(expected) + 2e-4, (i, got, expected)


def test_secondary_chunking_continues_a_state_and_equals_the_recurrent_form():
    """A prompt of 37 tokens in chunks of 32 (four sub-chunks), its state, then the rest in chunks of 48: the
    one-pass output and state, and the recurrent form's (one token per chunk), with strong decays."""
    q, k, v = (normal(i, (B, LONG, H, D), 0.5) for i in (11, 12, 13))
    g = strong_decays("positive")
    options = dict(estimator="positive", projection=W, is_causal=True, return_state=True)
    whole, state = rfa.kernelized_attention(q, k, v, log_decay=g, chunk_size=64, **options)
    first, prompt_state = rfa.kernelized_attention(
        q[:, :37], k[:, :37], v[:, :37], log_decay=g[:, :37], chunk_size=32, **options
    )
    rest, continued = rfa.kernelized_attention(
        q[:, 37:], k[:, 37:], v[:, 37:], log_decay=g[:, 37:], chunk_size=48, initial_state=prompt_state, **options
    )
    recurrent, recurrent_state = rfa.kernelized_attention(q, k, v, log_decay=g, chunk_size=1, **options)
    np.testing.assert_allclose(jnp.concatenate([first, rest], axis=1), whole, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(recurrent, whole, rtol=2e-4, atol=2e-5)
    for other in (continued, recurrent_state):
        np.testing.assert_allclose(other.value(), state.value(), rtol=2e-4, atol=2e-5)
