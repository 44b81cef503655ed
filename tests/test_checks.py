"""Errors under jit instead of NaN: rfa.checks.raise_if, a positive log_decay, NaN input and the opt-in NaN checks."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import normal, run_as_users_do, tiered

import rfa
from rfa.models import Encoder, Site, preset
from rfa.models.forecaster import ForecastConfig, Forecaster

B, L, H, D = 2, 8, 2, 8
Q, K, V = (jnp.asarray(normal(i, (B, L, H, D), 0.5)) for i in range(3))
W = rfa.sample_projection(jax.random.key(0), 16, D)


def test_raise_if_raises_now_when_concrete_and_when_the_compiled_function_runs_when_traced():
    with pytest.raises(ValueError, match="too big"):
        rfa.checks.raise_if(jnp.array([False, True]), "too big")
    rfa.checks.raise_if(jnp.array([False, False]), "too big")

    def f(x):
        rfa.checks.raise_if(x > 1, "too big", TypeError)
        return 2 * x

    np.testing.assert_array_equal(jax.jit(f)(jnp.array([0.5, 1.0])), [1.0, 2.0])
    for traced in (jax.jit(f), jax.jit(jax.vmap(f)), jax.jit(jax.grad(lambda x: jnp.sum(f(x))))):
        with pytest.raises(jax.errors.JaxRuntimeError, match="TypeError: too big"):
            jax.block_until_ready(traced(jnp.array([0.5, 1.5])))


def decayed(log_decay):
    return rfa.kernelized_attention(Q, K, V, estimator="positive", projection=W, is_causal=True, log_decay=log_decay)


def test_a_positive_log_decay_raises_eagerly_and_under_jit_and_grad():
    with pytest.raises(ValueError, match=r"got a maximum of 0\.5"):
        decayed(jnp.full((B, L, H), 0.5))
    positive = jnp.zeros((B, L, H)).at[1, 3, 0].set(0.1)
    with pytest.raises(jax.errors.JaxRuntimeError, match="log_decay must be <= 0"):
        jax.block_until_ready(jax.jit(decayed)(positive))
    with pytest.raises(jax.errors.JaxRuntimeError, match="log_decay must be <= 0"):
        jax.block_until_ready(jax.jit(jax.grad(lambda g: jnp.sum(decayed(g))))(positive))
    decay = -jnp.ones((B, L, H))
    np.testing.assert_allclose(jax.jit(decayed)(decay), decayed(decay), rtol=1e-5, atol=1e-6)


def test_nan_checks_name_the_array_under_jit_and_are_off_outside():
    bad_k = K.at[0, 2, 1, 3].set(jnp.nan)

    def attend(k):
        return rfa.kernelized_attention(Q, k, V, estimator="positive", projection=W)

    out = jax.jit(attend)(bad_k)  # off by default: the head's output is NaN, silently
    assert bool(jnp.all(jnp.isnan(out[0, :, 1]))) and bool(jnp.all(jnp.isfinite(out[1])))
    with rfa.checks.nan_checks():
        assert rfa.checks.nan_checks_enabled()
        with pytest.raises(ValueError, match="k holds NaN or inf"):
            attend(bad_k)
        with pytest.raises(jax.errors.JaxRuntimeError, match="k holds NaN or inf"):
            jax.block_until_ready(jax.jit(attend)(bad_k))
        with pytest.raises(jax.errors.JaxRuntimeError, match="v holds NaN or inf"):
            jax.block_until_ready(jax.jit(lambda v: rfa.softmax_attention(Q, K, v))(V.at[1, 0, 0, 0].set(jnp.inf)))
        np.testing.assert_allclose(jax.jit(attend)(K), attend(K), rtol=1e-5, atol=1e-6)
    assert not rfa.checks.nan_checks_enabled()
    assert bool(jnp.any(jnp.isnan(jax.jit(attend)(bad_k))))  # retraced without the check


@pytest.mark.parametrize("site", [Site(), Site("positive", num_features=16)], ids=["softmax", "positive"])
def test_nan_checks_cover_the_attention_of_rfa_models_and_flax_layers(site):
    model = Encoder(preset("tiny", vocab_size=20, encoder_attention=site), rngs=nnx.Rngs(0))
    model.embed.tokens.embedding[...] = model.embed.tokens.embedding[...].at[3].set(jnp.nan)
    tokens = jnp.full((2, 6), 3, jnp.int32)
    with rfa.checks.nan_checks(), pytest.raises(jax.errors.JaxRuntimeError, match="holds NaN or inf"):
        jax.block_until_ready(nnx.jit(lambda model, tokens: model(tokens))(model, tokens))
    layer = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(0))
    with rfa.checks.nan_checks(), pytest.raises(ValueError, match="holds NaN or inf"):
        layer(jnp.ones((1, 4, 16)).at[0, 1, 2].set(jnp.nan))


@pytest.mark.parametrize("kind", tiered(["kernelized", "softmax", "sliding_window", "nnx"], {"kernelized", "nnx"}))
def test_nan_only_at_padded_positions_is_ignored_by_the_attention_and_by_the_checks(kind):
    """A padded key or value (and, under Flax's query-and-key mask, query) reaches no output: rfa's attentions
    ignore its NaN (the reference: that position finite) and ``nan_checks`` does not raise; NaN at a kept position
    still raises."""
    x = jax.random.normal(jax.random.key(0), (2, 6, 2, 8))
    valid = jnp.arange(6)[None] < jnp.array([[6], [4]])  # sequence 1 ends with 2 padding tokens
    keys = valid[:, None, None, :]  # key padding
    W = rfa.sample_projection(jax.random.key(1), 16, 8)
    layer = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(0))
    attend = {
        "kernelized": lambda q, kv: rfa.kernelized_attention(q, kv, kv, estimator="positive", projection=W, mask=keys),
        "softmax": lambda q, kv: rfa.softmax_attention(q, kv, kv, mask=keys),
        "sliding_window": lambda q, kv: rfa.attention.sliding_window_attention(q, kv, kv, window=3, mask=keys),
        "nnx": lambda q, kv: layer(kv.reshape(2, 6, 16), mask=nnx.make_attention_mask(valid, valid)),
    }[kind]
    padded = x.at[1, 5].set(jnp.nan)
    with rfa.checks.nan_checks():
        out = jax.jit(attend)(x, padded)
        with pytest.raises(jax.errors.JaxRuntimeError, match="holds NaN or inf"):
            jax.block_until_ready(jax.jit(attend)(x, x.at[1, 2, 0, 0].set(jnp.nan)))
    expected = attend(x, x)
    np.testing.assert_allclose(out[0], expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1, :4], expected[1, :4], rtol=1e-5, atol=1e-6)


def test_the_forecaster_refuses_nan_input_eagerly_and_under_jit():
    config = ForecastConfig(lookback=8, horizon=2, patch_length=4, attention=Site("positive", num_features=8))
    model = Forecaster(config, rngs=nnx.Rngs(0))
    x = jnp.zeros((2, 8, 1)).at[1, 5, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="x holds NaN or inf: the forecaster refuses series with missing values"):
        model(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match="the forecaster refuses series with missing values"):
        jax.block_until_ready(nnx.jit(lambda model, x: model(x))(model, x))
    assert nnx.jit(lambda model, x: model(x))(model, jnp.zeros((2, 8, 1))).shape == (2, 2, 1)


CHECKED_CALLS_BESIDE_EAGER_OPS = """
import jax, jax.numpy as jnp
from flax import nnx
import rfa

q = jax.random.normal(jax.random.key(0), (2, 64, 4, 16))
k = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
beta, decay = jnp.full((2, 64, 4), 0.5), jnp.full((2, 64, 4), -0.1)
W = rfa.sample_projection(jax.random.key(1), 32, 16)
layer = rfa.nnx.MultiHeadAttention(4, 64, num_features=32, decode=False, rngs=nnx.Rngs(0))
valid = jnp.arange(64)[None] < jnp.array([[64], [40]])
mask = nnx.combine_masks(nnx.make_causal_mask(valid), nnx.make_attention_mask(valid, valid))
delta = jax.jit(rfa.attention.delta_rule_attention)  # every array an argument: the checks are traced
# under vmap the check's cond runs both branches: the host side runs on every call
mapped = jax.jit(jax.vmap(rfa.attention.delta_rule_attention))
decayed = jax.jit(lambda q, k, v, g: rfa.kernelized_attention(q, k, v, estimator="positive", projection=W,
                                                              is_causal=True, log_decay=g))
attend = nnx.jit(lambda layer, x, mask: layer(x, mask=mask))
calls = {
    "delta_rule_attention": lambda v: delta(q, k, v, beta),
    "vmapped delta_rule_attention": lambda v: mapped(q, k, v, beta),
    "kernelized_attention with log_decay": lambda v: decayed(q, k, v, decay),
    "rfa.nnx.MultiHeadAttention with a causal and padding mask": lambda v: attend(layer, v.reshape(2, 64, 64), mask),
}
for name, call in calls.items():
    v = q
    for _ in range(200):
        out = call(v)
        v = v + 1e-3  # an eager op, dispatched while the call may still run
    jax.block_until_ready(out)
    print(name, "finished 200 calls", flush=True)
v = q
for _ in range(400):  # the host side on every call: more chances for the race it had
    out = calls["vmapped delta_rule_attention"](v)
    v = v + 1e-3
jax.block_until_ready(out)
print("vmapped delta_rule_attention finished 400 more calls", flush=True)
"""


@pytest.mark.slow
def test_jitted_checked_calls_beside_eager_ops_do_not_freeze():
    """A traced check's host side once read its flag with ``np.any``, which called the jax.Array's ``.any()``: a
    JAX computation dispatched from XLA's callback thread, which deadlocked with the eager op the main thread
    dispatched (each of these loops hung, on 2 cores, with XLA's default flags)."""
    printed = run_as_users_do(CHECKED_CALLS_BESIDE_EAGER_OPS, timeout=150, what="200 checked calls beside eager ops")
    assert printed.count("finished 200 calls") == 4 and "finished 400 more calls" in printed, printed


def test_the_switch_turns_the_checks_of_values_off_eagerly_and_under_jit_and_keeps_shape_checks():
    beta = jnp.full((B, L, H), 3.0)  # outside [0, 2]
    delta = jax.jit(rfa.attention.delta_rule_attention)
    with pytest.raises(rfa.InputError, match="beta must lie in"):
        rfa.attention.delta_rule_attention(Q, K, V, beta)
    with pytest.raises(rfa.InputError, match=r"beta must lie in \[0, 2\].*from 3\.0 to 3\.0"):
        rfa.checks.checked(delta)(Q, K, V, beta)
    assert rfa.checks.is_enabled()
    with rfa.checks.enabled(False):
        assert not rfa.checks.is_enabled()
        eager, jitted = rfa.attention.delta_rule_attention(Q, K, V, beta), delta(Q, K, V, beta)
        np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-5)  # wrong numbers, as documented, no error
        assert bool(jnp.all(jnp.isfinite(decayed(jnp.full((B, L, H), 0.5)))))
        with pytest.raises(rfa.InputError, match="beta"):  # shapes are still checked
            rfa.attention.delta_rule_attention(Q, K, V, beta[:, :, :1, None])
    with pytest.raises(jax.errors.JaxRuntimeError, match="beta must lie in"):  # retraced with the checks
        jax.block_until_ready(delta(Q, K, V, beta))


def test_a_caught_check_error_prints_nothing(capfd, caplog):
    """JAX logs a failed callback with its traceback (logger ``jax._src.debugging``) before re-raising; rfa drops
    that record for its own checks. pytest captures log records itself, so the record is looked for there."""
    step = rfa.checks.checked(jax.jit(decayed))
    with caplog.at_level(logging.WARNING), pytest.raises(rfa.InputError, match=r"log_decay must be <= 0 .*of 0\.25"):
        step(jnp.zeros((B, L, H)).at[0, 1, 1].set(0.25))
    assert capfd.readouterr().err == ""
    assert [record.getMessage() for record in caplog.records if record.name == "jax._src.debugging"] == []
