"""The precision policy (docs/howto/precision.md), over 2048 tokens: the delta rule with bfloat16 operands and a
float32 state holds float32 on the same inputs, chunked and token by token, with weak and strong decays; a
bfloat16 state given is promoted; a stateful layer of ``dtype=jnp.bfloat16`` holds its float32 twin (the same
float32 parameters). bfloat16 keeps 8 bits of mantissa, a relative rounding of 0.4%."""

import functools
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered

import rfa

L, D = 2048, 32
DECAYS = {  # log-decays: None, or (scale, axes): uniform in [scale, 0], one per token (3 axes) or per key channel
    "none": None,
    "token_weak": (-0.001, 3),
    "token_strong": (-3.0, 3),
    "channel_weak": (-0.001, 4),
    "channel_strong": (-3.0, 4),
}


def _relative_rms(out, expected):
    out, expected = np.asarray(out, np.float32), np.asarray(expected, np.float32)
    return np.sqrt(np.mean((out - expected) ** 2) / np.mean(expected**2))


@pytest.mark.parametrize("decay", tiered(list(DECAYS), {"channel_weak"}))
def test_the_delta_rule_with_bfloat16_operands_and_a_float32_state_holds_float32(decay):
    """On inputs rounded to bfloat16, against float32 on the same inputs: the chunked form with
    ``compute_dtype=bfloat16`` within 1% relative RMS in output and state (measured 0.3-0.5%); the recurrent form
    (decoding) from a bfloat16 ``initial_state`` returns a float32 state and stays within 1% (measured 0.17%; a
    state kept in bfloat16 drifted 18-22% off with the weak decays, where each decay near 1 rounds to 1)."""
    keys = jax.random.split(jax.random.key(0), 5)
    q, k = (jax.random.normal(key, (1, L, 2, D)) for key in keys[:2])
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
    v, beta = jax.random.normal(keys[2], (1, L, 2, D)), jnp.full((1, L, 2), 0.05)
    g = None
    if DECAYS[decay] is not None:
        scale, axes = DECAYS[decay]
        g = scale * jax.random.uniform(keys[3], (1, L, 2, D)[:axes])
    rounded = [None if x is None else x.astype(jnp.bfloat16) for x in (q, k, v, beta, g)]
    exact = [None if x is None else x.astype(jnp.float32) for x in rounded]
    attend = jax.jit(
        rfa.attention.delta_rule_attention, static_argnames=("chunk_size", "compute_dtype", "return_state")
    )
    expected, state = attend(*exact[:4], log_decay=exact[4], chunk_size=64, return_state=True)
    out, low_state = attend(
        *rounded[:4], log_decay=rounded[4], chunk_size=64, return_state=True, compute_dtype=jnp.bfloat16
    )
    assert _relative_rms(out, expected) < 0.01 and _relative_rms(low_state, state) < 0.01
    empty = jnp.zeros((1, 2, D, D), jnp.bfloat16)
    out, low_state = attend(*rounded[:4], log_decay=rounded[4], chunk_size=1, return_state=True, initial_state=empty)
    assert low_state.dtype == jnp.float32
    assert _relative_rms(out, expected) < 0.01 and _relative_rms(low_state, state) < 0.01


KERNELIZED = {  # (estimator, causal, log-decays as in DECAYS)
    "positive_bidirectional": ("positive", False, "none"),
    "positive_token_strong": ("positive", True, "token_strong"),
    "elu_token_weak": ("elu", True, "token_weak"),
    "elu_feature_weak": ("elu", True, "channel_weak"),  # GLA: a decay per feature (d features for elu)
    "elu_feature_strong": ("elu", True, "channel_strong"),
}


@pytest.mark.parametrize("case", tiered(list(KERNELIZED), {"elu_feature_strong"}))
def test_kernelized_attention_with_bfloat16_operands_holds_float32(case):
    """On inputs rounded to bfloat16, against float32 on the same inputs: ``compute_dtype=bfloat16`` (the chunk's
    and the state's matmuls on bfloat16 operands; the maps, references, decays and state in float32) within 1%
    relative RMS in output and state, bidirectional and causal, with a decay per token or per feature; the state
    it returns is float32. The float32 state's error is bfloat16's rounding, not 0: the operands were bfloat16 (float32
    operands of these inputs, exact in float32, give 0; the output's error is mostly its own rounding to bfloat16)."""
    estimator, causal, decay = KERNELIZED[case]
    keys = jax.random.split(jax.random.key(1), 5)
    q, k, v = (jax.random.normal(key, (1, L, 2, D)) * 0.5 for key in keys[:3])
    g = None
    if DECAYS[decay] is not None:
        scale, axes = DECAYS[decay]
        g = scale * jax.random.uniform(keys[3], (1, L, 2, D)[:axes])
    rounded = [None if x is None else x.astype(jnp.bfloat16) for x in (q, k, v, g)]
    exact = [None if x is None else x.astype(jnp.float32) for x in rounded]
    fm = rfa.estimator(estimator)
    W = rfa.sample_projection(keys[4], 64, D) if fm.needs_projection else None
    attend = jax.jit(
        functools.partial(rfa.kernelized_attention, estimator=estimator, is_causal=causal, return_state=True),
        static_argnames="compute_dtype",
    )
    expected, state = attend(*exact[:3], projection=W, log_decay=exact[3])
    out, low_state = attend(*rounded[:3], projection=W, log_decay=rounded[3], compute_dtype=jnp.bfloat16)
    assert low_state.kv.dtype == jnp.float32
    out_error, state_error = _relative_rms(out, expected), _relative_rms(low_state.value(), state.value())
    assert out_error < 0.01 and 1e-5 < state_error < 0.01  # measured 0.18-0.23% and 0.01-0.16%


LAYERS = {
    "deltanet": lambda **p: rfa.nnx.DeltaNet(2, D, **p),
    "gated_deltanet": lambda **p: rfa.nnx.GatedDeltaNet(2, D, num_v_heads=4, **p),
    "kda": lambda **p: rfa.nnx.KimiDeltaAttention(2, D, **p),
    "gla": lambda **p: rfa.nnx.GatedLinearAttention(2, D, **p),
    "window": lambda **p: rfa.nnx.SlidingWindowAttention(2, D, window=64, **p),
}


@nnx.jit
def _apply(layer, x):
    return layer(x)


def _strong_decays(layer):
    """``A = 1`` and ``dt_bias = 1``: log-decays about −1.3 per token (−exp(A_log) · softplus(a x + dt_bias))."""
    if hasattr(layer, "A_log"):
        layer.A_log.set_value(jnp.zeros_like(layer.A_log[...]))
        layer.dt_bias.set_value(jnp.ones_like(layer.dt_bias[...]))


@pytest.mark.parametrize("kind", tiered(list(LAYERS), {"kda"}))
def test_a_bfloat16_layer_holds_its_float32_twin_over_2048_tokens(kind):
    """The projections and the output in bfloat16, the delta rule's chunk on bfloat16 operands, its state, decays
    and solve in float32: within 2% relative RMS of the float32 layer (measured 0.4-0.9%, most of it the rounding
    of the projections), the delta-rule layers with log-decays near −1.3 per token."""
    full, low = (LAYERS[kind](dtype=dtype, rngs=nnx.Rngs(0)) for dtype in (jnp.float32, jnp.bfloat16))
    for layer in (full, low):
        _strong_decays(layer)
    x = np.random.default_rng(0).normal(size=(1, L, D)).astype(np.float32)
    expected, out = _apply(full, jnp.asarray(x)), _apply(low, jnp.asarray(x, jnp.bfloat16))
    assert out.dtype == jnp.bfloat16
    assert _relative_rms(out, expected) < 0.02  # measured 0.4-0.9%
    if hasattr(low, "state_dtype"):  # the delta rule's state and its empty cache are float32
        assert low.state_dtype == jnp.float32 and low.empty_state(1)["state"].dtype == jnp.float32


def test_the_precision_pages_example_runs():
    """docs/results/precision.md's example: a bfloat16 layer with a float32 state."""
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "results" / "precision.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    exec(example, {"rfa": rfa, "jnp": jnp, "nnx": nnx})
