"""The RMSNorm and the gated MLP of Llama-style decoders against their formulas in NumPy float64 (Qwen3's plain
norm through the whole model: tests/models/test_qwen3.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from flax import nnx
from helpers import normal

import rfa
from rfa.layers import GatedMLP, RMSNorm


@pytest.mark.parametrize("zero_centered", [False, True])
def test_rms_norm_is_the_formula(zero_centered):
    x, w = normal(0, (3, 5, 16)), normal(1, (16,), 0.3)
    norm = RMSNorm(16, eps=1e-5, zero_centered=zero_centered)
    norm.weight[...] = jnp.asarray(w)
    expected = (
        x / np.sqrt(np.mean(np.float64(x) ** 2, axis=-1, keepdims=True) + 1e-5) * ((1 + w) if zero_centered else w)
    )
    out = jax.jit(lambda x: norm(x))(jnp.asarray(x))
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=2e-6)
    assert float(RMSNorm(16, zero_centered=zero_centered)(jnp.asarray(x)).std()) == pytest.approx(1.0, rel=0.02)


def test_a_bfloat16_input_is_normed_in_float32_and_cast_as_transformers_orders_it():
    """Qwen3: the normalized input cast to bfloat16, then the scale; Qwen3.5 (zero-centered): scaled in float32, then
    cast. The two orders round differently."""
    x, w = jnp.asarray(normal(0, (4, 64)), jnp.bfloat16), normal(1, (64,), 0.3)
    h = np.float32(x) / np.sqrt(np.mean(np.float32(x) ** 2, axis=-1, keepdims=True) + 1e-6)
    plain, centered = RMSNorm(64), RMSNorm(64, zero_centered=True)
    plain.weight[...], centered.weight[...] = jnp.asarray(w), jnp.asarray(w)
    cast_then_scale = np.float32(jnp.asarray(w, jnp.bfloat16) * jnp.asarray(h, jnp.bfloat16))
    np.testing.assert_array_equal(np.float32(plain(x)), cast_then_scale)
    np.testing.assert_array_equal(np.float32(centered(x)), np.float32(jnp.asarray(h * (1 + w), jnp.bfloat16)))
    assert plain(x).dtype == centered(x).dtype == jnp.bfloat16


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_the_gated_mlp_is_down_of_act_gate_times_up(activation):
    mlp = GatedMLP(8, 12, activation=activation, rngs=nnx.Rngs(0))
    x = normal(2, (2, 3, 8))
    gate, up, down = (np.float64(getattr(mlp, n).kernel[...]) for n in ("gate", "up", "down"))
    g = x @ gate
    act = g / (1 + np.exp(-g)) if activation == "silu" else 0.5 * g * (1 + scipy.special.erf(g / 2**0.5))
    np.testing.assert_allclose(jax.jit(lambda x: mlp(x))(jnp.asarray(x)), (act * (x @ up)) @ down, rtol=1e-5, atol=1e-6)


def test_bad_widths_and_options_are_refused():
    with pytest.raises(rfa.InputError, match="RMSNorm of width 8 got an input of shape"):
        RMSNorm(8)(jnp.ones((2, 4)))
    with pytest.raises(rfa.InputError, match="eps must be > 0"):
        RMSNorm(8, eps=0.0)
    with pytest.raises(rfa.InputError, match="activation must be one of"):
        GatedMLP(8, 12, activation="swish", rngs=nnx.Rngs(0))
