"""The training and decoding steps of rfa's stateful models and layers compile no host call but the checks of the
arrays a user passes (a model's token ids and decoding position).

Their gates, decays and masks are computed by the model (a sigmoid, a log-sigmoid, ``−exp(A)·softplus(·)``, a
key-padding mask from bools), in range by construction; a run-time check of them (rfa.checks.raise_if) put a host
callback in every decoded token (gated RFA 10x, Gated DeltaNet 45x slower per token). The programs are lowered, not
run: a host callback shows in the lowered text, and the first test shows that a user's traced array does bring one.
"""

import jax
import jax.numpy as jnp
import pytest
from flax import linen as nn
from flax import nnx
from helpers import tiered
from model_helpers import VOCAB, tokens

import rfa
from rfa.models import Decoder, Site, preset

STATEFUL = {
    "gated_rfa": Site("rfa", num_features=8, gated=True),
    "gla": Site("elu", gated=True, gate="feature"),
    "deltanet": Site("deltanet", chunk_size=4),
    "gated_deltanet": Site("gated_deltanet", chunk_size=4),
    "kda": Site("kda", chunk_size=4),
    "sliding_window": Site("sliding_window", window=4),
    "hybrid": (Site("gated_deltanet", chunk_size=4), Site()),
}


def host_calls(lowered) -> int:
    """The host callbacks in a lowered program (``jax.debug.callback`` lowers to a custom call named for it)."""
    return lowered.as_text().count("callback")


def test_a_users_traced_array_brings_a_host_call_and_the_switch_removes_it():
    q = jnp.ones((1, 8, 2, 4))
    lowered = jax.jit(rfa.attention.delta_rule_attention).lower(q, q, q, jnp.full((1, 8, 2), 0.5))
    assert host_calls(lowered) > 0  # beta's range, checked where the user's array enters
    with rfa.checks.enabled(False):
        assert host_calls(jax.jit(rfa.attention.delta_rule_attention).lower(q, q, q, jnp.full((1, 8, 2), 0.5))) == 0


@pytest.mark.parametrize("kind", tiered(list(STATEFUL), {"gated_rfa", "gated_deltanet"}))
def test_the_training_and_decoding_steps_of_a_stateful_model_check_the_users_arrays_alone(kind):
    """A training step and a prefill check the token ids alone (one host call, made when one is outside the
    vocabulary); a decoding step its token's ids and its position (and a KV cache its slot, the hybrid's exact
    layer); inside ``rfa.checks.enabled(False)``, which :func:`rfa.models.decoding.generate`'s loop of its own
    tokens runs in, none."""
    model = Decoder(preset("tiny", vocab_size=VOCAB, decoder_attention=STATEFUL[kind], max_length=16), rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    state = nnx.merge_state(params, rest)
    sequence = tokens(0, (2, 8))

    def loss(params, sequence):
        return jnp.mean(nnx.merge(graphdef, params, rest)(sequence) ** 2)

    def decode(state, cache, token, position):
        return nnx.merge(graphdef, state).decode_step(token, cache, position)

    def prefill(state, prompt):
        return nnx.merge(graphdef, state).prefill(prompt, 16)

    cache, position = model.init_cache(2, 16), jnp.asarray(3)
    assert host_calls(jax.jit(jax.grad(loss)).lower(params, sequence)) == 1
    assert host_calls(jax.jit(prefill).lower(state, sequence)) == 1
    assert host_calls(jax.jit(decode).lower(state, cache, sequence[:, 0], position)) == 2 + (kind == "hybrid")
    with rfa.checks.enabled(False):
        assert host_calls(jax.jit(decode).lower(state, cache, sequence[:, 0], position)) == 0


LAYERS = {
    "nnx.GatedDeltaNet": lambda: rfa.nnx.GatedDeltaNet(2, 16, chunk_size=4, rngs=nnx.Rngs(0)),
    "nnx.GatedLinearAttention": lambda: rfa.nnx.GatedLinearAttention(2, 16, chunk_size=4, rngs=nnx.Rngs(0)),
    "nnx.KimiDeltaAttention": lambda: rfa.nnx.KimiDeltaAttention(2, 16, chunk_size=4, rngs=nnx.Rngs(0)),
    "nnx.MultiHeadAttention": lambda: rfa.nnx.MultiHeadAttention(2, 16, num_features=8, rngs=nnx.Rngs(0)),
}


@pytest.mark.parametrize("name", tiered(list(LAYERS), {"nnx.GatedDeltaNet"}))
def test_a_decoding_step_of_an_nnx_layer_makes_no_host_call(name):
    layer = LAYERS[name]()
    x = jax.random.normal(jax.random.key(0), (2, 1, 16))
    layer.init_cache((2, 8, 16))
    graphdef, state = nnx.split(layer)

    def step(state, x):
        layer = nnx.merge(graphdef, state)
        return layer(x, decode=True), nnx.state(layer)

    assert host_calls(jax.jit(step).lower(state, x)) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "layer",
    [
        rfa.linen.GatedDeltaNet(num_heads=2, chunk_size=4, decode=True),
        rfa.linen.GatedLinearAttention(num_heads=2, decode=True),
    ],
    ids=["GatedDeltaNet", "GatedLinearAttention"],
)
def test_a_decoding_step_of_a_linen_layer_makes_no_host_call(layer: nn.Module):
    x = jax.random.normal(jax.random.key(0), (2, 1, 16))
    variables = layer.init(jax.random.key(0), x)
    lowered = jax.jit(lambda variables, x: layer.apply(variables, x, mutable=["cache"])).lower(variables, x)
    assert host_calls(lowered) == 0
