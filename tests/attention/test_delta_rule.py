"""The delta rule (``rfa.attention.delta_rule_attention``) held to an independent float64 recurrence.

Every form (chunked at several chunk sizes, none dividing L; recurrent) against ``references.delta_rule``
(NumPy, float64, the papers' recurrence with the d_k × d_k transition formed): outputs, the state, and
directional derivatives of every input by central differences; full gradients against rfa's naive form. Then
what the rule means (β = 0 writes nothing; orthonormal keys with β = 1 read back the last value written),
decoding token by token, and the errors.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal, tiered

import rfa
from rfa.attention import delta_rule_attention, naive_delta_rule_attention
from rfa.attention.delta_rule import normalized_features
from rfa.attention.delta_rule.chunked import forward_substitution, solve_unit_lower

B, L, H, D_K, D_V = 2, 13, 2, 4, 3


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


Q, K = unit(normal(0, (B, L, H, D_K))), unit(normal(1, (B, L, H, D_K)))
V = normal(2, (B, L, H, D_V))
BETA = 2 / (1 + np.exp(-normal(3, (B, L, H))))  # in (0, 2): negative eigenvalues too
G = -np.log1p(np.exp(normal(4, (B, L, H))))  # log-decays < 0
G_CHANNEL = -np.log1p(np.exp(normal(9, (B, L, H, D_K))))  # one per key channel (KDA)
DECAYS = {"deltanet": None, "gated": G, "kda": G_CHANNEL}
S0 = 0.5 * normal(5, (B, H, D_K, D_V))
WEIGHTS = normal(6, (B, L, H, D_V))


def loss(fn, **options):
    """``Σ out ⊙ WEIGHTS + Σ state`` of ``fn(q, k, v, beta, log_decay=g, initial_state=s0)``: every output and
    every entry of the returned state carry gradient."""

    def value(q, k, v, beta, g, s0):
        out, state = fn(q, k, v, beta, log_decay=g, initial_state=s0, return_state=True, **options)
        return jnp.sum(out * WEIGHTS) + jnp.sum(state), (out, state)

    return value


def check_gradients(grads, reference_loss, args, seed):
    """Each gradient (None: an argument without one) against central differences of the float64 reference, along a
    random direction, and finite."""
    rng = np.random.default_rng(seed)
    for i, grad in enumerate(grads):
        if grad is None:
            continue
        assert bool(jnp.all(jnp.isfinite(grad))), i
        direction = rng.standard_normal(np.shape(args[i]))
        expected_derivative = references.directional_derivative(reference_loss, args, i, direction)
        derivative = float(np.sum(np.asarray(grad, np.float64) * direction))
        scale = np.linalg.norm(grad) * np.linalg.norm(direction)
        assert abs(derivative - expected_derivative) <= 1e-4 * scale, (i, derivative, expected_derivative)


@pytest.mark.parametrize("decay", list(DECAYS))
@pytest.mark.parametrize("chunk_size", tiered([1, 4, 5, 64], {5}))  # the fast tier: chunks of 5 in 13 tokens
def test_every_form_equals_the_float64_recurrence(chunk_size, decay):
    g = DECAYS[decay]
    gated = g is not None
    argnums = (0, 1, 2, 3, 4, 5) if gated else (0, 1, 2, 3, 5)  # the initial state's gradient too
    value = jax.jit(jax.value_and_grad(loss(delta_rule_attention, chunk_size=chunk_size), argnums, has_aux=True))
    (_, (out, state)), grads = value(Q, K, V, BETA, g, S0)
    expected, expected_state = references.delta_rule(Q, K, V, BETA, g, S0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected_state, rtol=1e-5, atol=1e-5)

    def reference_loss(q, k, v, beta, g, s0):
        out, state = references.delta_rule(q, k, v, beta, g, s0)
        return np.sum(out * WEIGHTS) + np.sum(state)

    args = (Q, K, V, BETA, g, S0)
    check_gradients([grads[argnums.index(i)] if i in argnums else None for i in range(6)], reference_loss, args, 7)

    naive = jax.grad(lambda *a: loss(naive_delta_rule_attention)(*a)[0], argnums)(Q, K, V, BETA, g, S0)
    for i, (grad, naive_grad) in enumerate(zip(grads, naive, strict=True)):
        if grad is not None:
            np.testing.assert_allclose(grad, naive_grad, rtol=1e-4, atol=1e-4, err_msg=f"gradient of argument {i}")


def test_the_naive_form_is_the_recurrence():
    out, state = naive_delta_rule_attention(Q, K, V, BETA, log_decay=G, initial_state=S0, return_state=True)
    expected, expected_state = references.delta_rule(Q, K, V, BETA, G, S0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected_state, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("decay", tiered(["gated", "kda"], {"kda"}))
def test_a_prompt_then_token_by_token_decoding_equals_the_full_pass(decay):
    g = DECAYS[decay]
    full = delta_rule_attention(Q, K, V, BETA, log_decay=g, chunk_size=4)
    prompt = 6
    out, state = delta_rule_attention(
        Q[:, :prompt],
        K[:, :prompt],
        V[:, :prompt],
        BETA[:, :prompt],
        log_decay=g[:, :prompt],
        return_state=True,
        chunk_size=4,
    )
    step = jax.jit(
        lambda s, *token: delta_rule_attention(*token[:4], log_decay=token[4], initial_state=s, return_state=True)
    )
    outputs = [out]
    for t in range(prompt, L):
        token, state = step(state, *(x[:, t : t + 1] for x in (Q, K, V, BETA, g)))
        outputs.append(token)
    np.testing.assert_allclose(jnp.concatenate(outputs, axis=1), full, rtol=1e-5, atol=1e-6)


LONG = 45  # sub-chunks of 8 inside chunks of 16, 20 (the last one partial) and 40, none dividing L


@pytest.mark.parametrize("decay", ["channel", "head"])
@pytest.mark.parametrize("chunk_size", tiered([16, 20, 40], {40}))
def test_decays_down_to_minus_300_equal_the_float64_recurrence(chunk_size, decay):
    """Log-decays from -1e-3 to -300 per token (Gated DeltaNet: one per head) or per token and key channel (KDA's
    chunk by sub-chunks), some keys kept across sub-chunks and chunks, others forgotten at once. Outputs, state and
    every gradient (the decays and the initial state too) against the float64 recurrence, all finite."""
    q, k = unit(normal(20, (B, LONG, H, D_K))), unit(normal(21, (B, LONG, H, D_K)))
    v, beta = normal(22, (B, LONG, H, D_V)), 1 / (1 + np.exp(-normal(23, (B, LONG, H))))
    shape = (B, LONG, H, D_K) if decay == "channel" else (B, LONG, H)
    rate = np.log(1e-3) + (np.log(300.0) - np.log(1e-3)) * np.random.default_rng(24).random(shape)
    g = -np.exp(rate).astype(np.float32)
    weights = normal(25, (B, LONG, H, D_V))

    def value(q, k, v, beta, g, s0):
        out, state = delta_rule_attention(
            q, k, v, beta, log_decay=g, initial_state=s0, return_state=True, chunk_size=chunk_size
        )
        return jnp.sum(out * weights) + jnp.sum(state), (out, state)

    (_, (out, state)), grads = jax.jit(jax.value_and_grad(value, argnums=(0, 1, 2, 3, 4, 5), has_aux=True))(
        q, k, v, beta, g, S0
    )
    expected, expected_state = references.delta_rule(q, k, v, beta, g, S0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected_state, rtol=1e-5, atol=1e-5)

    def reference_loss(*args):
        out, state = references.delta_rule(*args)
        return np.sum(out * weights) + np.sum(state)

    check_gradients(grads, reference_loss, (q, k, v, beta, g, S0), 26)


@pytest.mark.slow
def test_a_realistic_head_of_128_channels_over_2048_tokens_equals_the_float64_recurrence():
    """The chunked form (chunks of 64) and the recurrent form at a production head size, d_k = d_v = 128, over 2048
    tokens with Gated DeltaNet's decays: outputs and final state within 1e-5 of the float64 recurrence (measured
    3e-7 and 4e-7 on outputs of magnitude up to 0.8)."""
    rng = np.random.default_rng(40)
    q, k = (unit(rng.normal(size=(1, 2048, 1, 128))) for _ in range(2))
    v, beta = rng.normal(size=(1, 2048, 1, 128)), 1 / (1 + np.exp(-rng.normal(size=(1, 2048, 1))))
    g = -np.log1p(np.exp(rng.normal(size=(1, 2048, 1)) - 3))
    expected, expected_state = references.delta_rule(q, k, v, beta, g)
    args = [jnp.asarray(x, jnp.float32) for x in (q, k, v, beta, g)]
    for chunk_size in (64, 1):
        out, state = jax.jit(
            lambda q, k, v, beta, g, c=chunk_size: delta_rule_attention(
                q, k, v, beta, log_decay=g, return_state=True, chunk_size=c
            )
        )(*args)
        np.testing.assert_allclose(out, expected, atol=1e-5, err_msg=f"chunk_size={chunk_size}")
        np.testing.assert_allclose(state, expected_state, atol=1e-5, err_msg=f"chunk_size={chunk_size}")


def test_beta_zero_writes_nothing():
    beta = BETA.copy()
    beta[:, 4:9] = 0.0
    _, before = delta_rule_attention(Q[:, :4], K[:, :4], V[:, :4], BETA[:, :4], initial_state=S0, return_state=True)
    _, after = delta_rule_attention(
        Q[:, :9], K[:, :9], V[:, :9], beta[:, :9], initial_state=S0, return_state=True, chunk_size=3
    )
    np.testing.assert_allclose(after, before, rtol=1e-6, atol=1e-6)


def test_a_python_number_is_one_beta_for_every_token_and_a_number_out_of_range_is_refused():
    np.testing.assert_array_equal(
        delta_rule_attention(Q, K, V, 0.5), delta_rule_attention(Q, K, V, np.full_like(BETA, 0.5))
    )
    with pytest.raises(rfa.InputError, match=r"beta must lie in \[0, 2\]"):
        delta_rule_attention(Q, K, V, 3)


def test_orthonormal_keys_with_beta_one_read_back_the_last_value_written():
    basis = np.eye(D_K, dtype=np.float32)
    written = [0, 1, 0, 2, 1, 0, 3]  # key 0 written three times, key 1 twice
    k = basis[written][None, :, None, :]
    v = normal(8, (1, len(written), 1, D_V))
    q = np.broadcast_to(basis[0], k.shape)  # every position reads key 0
    out = delta_rule_attention(q, k, v, np.ones((1, len(written), 1), np.float32), chunk_size=3)
    last_for_key_0 = [v[0, max(i for i in range(t + 1) if written[i] == 0), 0] for t in range(len(written))]
    np.testing.assert_allclose(out[0, :, 0], np.stack(last_for_key_0), rtol=1e-6, atol=1e-6)


def test_dtype_in_is_dtype_out_and_vmap_equals_the_batch():
    out = delta_rule_attention(*(jnp.asarray(x, jnp.bfloat16) for x in (Q, K, V)), BETA)
    assert out.dtype == jnp.bfloat16
    batched = delta_rule_attention(Q, K, V, BETA, log_decay=G)
    mapped = jax.vmap(lambda *a: delta_rule_attention(*a[:4], log_decay=a[4]))(Q, K, V, BETA, G)
    np.testing.assert_allclose(mapped, batched, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"beta": 2.5 * np.ones((B, L, H), np.float32)}, "beta must lie in [0, 2]"),
        ({"beta": -BETA}, "beta must lie in [0, 2]"),
        ({"log_decay": -G}, "log_decay must be <= 0"),
        ({"log_decay": -G_CHANNEL}, "log_decay must be <= 0"),
        ({"log_decay": G_CHANNEL[..., :3]}, "log_decay must be broadcastable to [batch..., L, heads, d_k]"),
        ({"beta": BETA[:, :, :1, None]}, "beta must be broadcastable to [batch..., L, heads]"),
        ({"initial_state": S0[..., :2]}, "initial_state must have shape [batch..., heads, d_k, d_v] = (2, 2, 4, 3)"),
        ({"k": K[:, :5], "v": V[:, :5]}, "is_causal=True needs q_len == kv_len"),
    ],
    ids=[
        "beta_above_2",
        "beta_negative",
        "positive_decay",
        "positive_channel_decay",
        "channel_decay_shape",
        "beta_shape",
        "state_shape",
        "lengths",
    ],
)
def test_bad_input_is_an_error_that_says_what_was_expected(change, message):
    args = {"q": Q, "k": K, "v": V, "beta": BETA, "log_decay": G, "initial_state": None} | change
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        delta_rule_attention(**args)


@pytest.mark.parametrize("name", ["beta", "log_decay"])
def test_values_out_of_range_are_errors_under_jit(name):
    bad = {"beta": 2.5 * np.ones((B, L, H), np.float32), "log_decay": -G}[name]
    args = {"beta": BETA, "log_decay": G} | {name: bad}
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"beta must lie in|log_decay must be <= 0"):
        jax.jit(lambda beta, log_decay: delta_rule_attention(Q, K, V, beta, log_decay=log_decay))(**args)


def test_an_estimators_normalized_features_are_its_features_over_their_norm():
    """``normalized_features``: φ(x d^{-1/4})/‖·‖ of positive features (NumPy), finite for inputs of norm 100."""
    W = np.asarray(jax.random.normal(jax.random.key(9), (16, D_K)), np.float32)
    q, k = jax.jit(lambda q, k: normalized_features(q, k, estimator="positive", projection=W))(Q, K)
    for x, out in ((Q, q), (K, k)):
        phi = references.positive(np.asarray(x, np.float64) * D_K**-0.25, W)
        np.testing.assert_allclose(out, phi / np.linalg.norm(phi, axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
    large, _ = normalized_features(100 * Q, K, estimator="positive", projection=W)
    assert bool(jnp.all(jnp.isfinite(large))) and np.allclose(jnp.linalg.norm(large, axis=-1), 1.0, atol=1e-5)


def test_the_naive_form_returns_the_outputs_alone_by_default():
    out = naive_delta_rule_attention(Q, K, V, BETA, log_decay=G, initial_state=S0)
    np.testing.assert_allclose(out, references.delta_rule(Q, K, V, BETA, G, S0)[0], rtol=1e-4, atol=1e-5)


def test_the_solves_gradient_by_the_transposed_system_equals_autodiff_through_the_substitution():
    """``solve_unit_lower``'s hand-written VJP against JAX's autodiff of the forward substitution it wraps, in
    float64, at a size the halving splits unevenly; the diagonal and upper part of the matrix get no gradient."""
    with jax.enable_x64(True):
        lower, rhs, weights = (
            jnp.asarray(normal(30 + i, shape), jnp.float64) for i, shape in enumerate([(3, 7, 7), (3, 7, 5), (3, 7, 5)])
        )

        def loss(solve):
            return lambda a, b: jnp.sum(jnp.sin(solve(a, b)) * weights)

        got = jax.jit(jax.grad(loss(solve_unit_lower), argnums=(0, 1)))(lower, rhs)
        expected = jax.grad(loss(forward_substitution), argnums=(0, 1))(lower, rhs)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
        assert float(jnp.max(jnp.abs(jnp.triu(got[0])))) == 0.0
