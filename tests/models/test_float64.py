"""Every attention kind's model core under ``jax.enable_x64``: a model of ``dtype="float64"`` runs, in values and
gradients, and equals the float32 model of the same weights (the parameters are float32 in both) to float32's
precision; a causal kind decodes a token from its cache. Under x64 a constant without a dtype is float64, and a
scan whose carry it reaches changes type (DeltaNet's and KDA's did: "scan body function carry input and carry
output must have equal types")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered
from model_helpers import VOCAB, tokens

from rfa.layers import attention_kind, registered_attention_kinds
from rfa.models import Decoder, Encoder, Site, preset

OPTIONS = {"sliding_window": {"window": 4}, "linformer": {"projected_length": 4}}


@nnx.jit
def _loss_and_grads(model, sequence):
    def loss(model):
        out = model(sequence).astype(jnp.float32)
        return jnp.mean(out * out)

    return nnx.value_and_grad(loss)(model)


@nnx.jit
def _first_token(model, token):
    return model.decode_step(token, model.init_cache(token.shape[0], 8), 0)[0]


def _model(kind, dtype):
    site = Site(kind, **OPTIONS.get(kind, {}))
    if attention_kind(kind).causal:
        config = preset("tiny", vocab_size=VOCAB, max_length=16, decoder_attention=site, dtype=dtype)
        return Decoder(config, rngs=nnx.Rngs(0))
    config = preset("tiny", vocab_size=VOCAB, max_length=16, encoder_attention=site, num_classes=3, dtype=dtype)
    return Encoder(config, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("kind", tiered(list(registered_attention_kinds()), {"kda"}))
def test_a_float64_model_runs_in_values_and_gradients_and_equals_float32(kind):
    sequence = tokens(2, (2, 8))
    with jax.enable_x64(True):
        results = [_loss_and_grads(_model(kind, dtype), sequence) for dtype in ("float64", "float32")]
        (value, grads), (value32, grads32) = results
        np.testing.assert_allclose(value, value32, rtol=1e-4)
        leaves, leaves32 = (jax.tree.leaves(nnx.state(g)) for g in (grads, grads32))
        scale = max(np.abs(g).max() for g in leaves32)  # a tolerance of the model's largest gradient
        for g, g32 in zip(leaves, leaves32, strict=True):
            assert np.all(np.isfinite(g))
            np.testing.assert_allclose(g, g32, rtol=1e-3, atol=1e-4 * scale)
        if attention_kind(kind).causal:
            model = _model(kind, "float64")
            assert np.all(np.isfinite(_first_token(model, sequence[:, 0])))
