"""Every attention kind's model core under ``jax.enable_x64``: a model of ``dtype="float64"`` with float64 weights
runs in float64, in values and gradients. Its gradient equals central differences of its own loss to 2e-9 of its
norm (a float32 step anywhere inside leaves float32's rounding over the differences' step: GLA's gate in float32
gave 7e-8), and it equals the float32 model of the same weights to float32's precision; a causal kind decodes a token
from its cache. Under x64 a constant without a dtype is float64, and a scan whose carry it reaches changes type
(DeltaNet's and KDA's did: "scan body function carry input and carry output must have equal types")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered
from model_helpers import VOCAB, tokens

from rfa.layers import attention_kind, registered_attention_kinds
from rfa.models import Decoder, Encoder, Site, preset

# Every kind with its defaults, and GLA's per-feature gate (kernelized attention with a state of another shape).
SITES = {kind: Site(kind) for kind in registered_attention_kinds()} | {
    "sliding_window": Site("sliding_window", window=4),
    "linformer": Site("linformer", projected_length=4),
    "gla": Site("elu", gated=True, gate="feature"),
}

# float32's error in a gradient, as a fraction of the largest: Fourier integral attention's weights are signed products
# of sincs whose sum (the normalizer) cancels, and float32 keeps fewer of its digits (measured: 9e-4).
FLOAT32_GRADIENT_ERROR = {"fourier": 2e-3}


def _loss(params, graphdef, rest, sequence):
    out = nnx.merge(graphdef, params, rest)(sequence)
    return jnp.mean(out * out)


_loss_and_grads = jax.jit(jax.value_and_grad(_loss), static_argnums=1)
_loss_only = jax.jit(_loss, static_argnums=1)


def _split(model):
    """``(weights, graph, other variables)``: the arguments of ``_loss`` before the sequence."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return params, graphdef, rest


@nnx.jit
def _first_token(model, token):
    return model.decode_step(token, model.init_cache(token.shape[0], 8), 0)[0]


def _model(name, dtype):
    """The model of site ``name``, its weights (and every other floating variable) in ``dtype``."""
    site, smooth = SITES[name], {"activation": "gelu"}  # no ReLU kink for the central differences to straddle
    if attention_kind(site.kind).causal:
        config = preset("tiny", vocab_size=VOCAB, max_length=16, decoder_attention=site, dtype=dtype, **smooth)
        model = Decoder(config, rngs=nnx.Rngs(0))
    else:
        config = preset(
            "tiny", vocab_size=VOCAB, max_length=16, encoder_attention=site, num_classes=3, dtype=dtype, **smooth
        )
        model = Encoder(config, rngs=nnx.Rngs(0))
    floating = nnx.state(model, lambda _, x: jnp.issubdtype(jnp.asarray(x[...]).dtype, jnp.floating))
    nnx.update(model, jax.tree.map(lambda x: x.astype(dtype), floating))
    return model


@pytest.mark.parametrize("name", tiered(list(SITES), {"kda"}))
def test_a_float64_model_runs_in_float64_in_values_and_gradients(name):
    sequence = tokens(2, (2, 8))
    with jax.enable_x64(True):
        (value, grads), (value32, grads32) = (
            _loss_and_grads(*_split(_model(name, dtype)), sequence) for dtype in ("float64", "float32")
        )
        assert value.dtype == jnp.float64 and value32.dtype == jnp.float32
        np.testing.assert_allclose(value, value32, rtol=1e-4)
        leaves, leaves32 = jax.tree.leaves(grads), jax.tree.leaves(grads32)
        scale = max(np.abs(g).max() for g in leaves32)  # a tolerance of the model's largest gradient
        for g, g32 in zip(leaves, leaves32, strict=True):
            assert g.dtype == jnp.float64 and np.all(np.isfinite(g))
            np.testing.assert_allclose(g, g32, rtol=1e-3, atol=FLOAT32_GRADIENT_ERROR.get(name, 1e-4) * scale)

        params, graphdef, rest = _split(_model(name, "float64"))
        keys = iter(jax.random.split(jax.random.key(3), len(leaves)))
        direction = jax.tree.map(lambda p: jax.random.normal(next(keys), p.shape, p.dtype), params)
        eps = 1e-6  # truncation ~eps², rounding ~1e-16/eps: both far below a float32 step's ~1e-7/eps
        plus, minus = (jax.tree.map(lambda p, d, s=sign: p + s * eps * d, params, direction) for sign in (1, -1))
        expected = (_loss_only(plus, graphdef, rest, sequence) - _loss_only(minus, graphdef, rest, sequence)) / (
            2 * eps
        )
        derivative = sum(jnp.vdot(g, d) for g, d in zip(leaves, jax.tree.leaves(direction), strict=True))
        norm = np.sqrt(sum(jnp.vdot(g, g) for g in leaves) * sum(jnp.vdot(d, d) for d in jax.tree.leaves(direction)))
        # measured: 2e-13 to 3e-11, Fourier's 4e-10; GLA's gate in float32 gives 7e-8
        assert abs(float(derivative - expected)) <= 2e-9 * float(norm), (float(derivative), float(expected))
        if attention_kind(SITES[name].kind).causal:
            model = nnx.merge(graphdef, params, rest)
            assert np.all(np.isfinite(_first_token(model, sequence[:, 0])))
