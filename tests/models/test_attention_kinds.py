"""The attention kinds beyond softmax and fixed random features, inside the models: Taylor (Based),
gated RFA, Hedgehog, Fourier integral attention, Linformer. Decoding equals teacher forcing for every causal
kind, learned maps are trained parameters, Linformer excludes padding and refuses what it cannot do."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import references
from flax import nnx
from helpers import tiered
from model_helpers import VOCAB, encode, forward, step_by_step, tokens

from rfa.models import Decoder, Encoder, EncoderDecoder, Site, preset

SITES = {
    "taylor": Site("taylor"),
    "rfa": Site("rfa", num_features=32),
    "gated_rfa": Site("rfa", num_features=32, gated=True),
    "gated_positive": Site("positive", num_features=32, gated=True),
    "hedgehog": Site("hedgehog", num_features=8),
    "fourier": Site("fourier", radius=1.5),
    "gla": Site("positive", num_features=16, gated=True, gate="feature"),
}
LINFORMER = Site("linformer", projected_length=6)


def config(kind, **overrides):
    """The kind at every site where it can run: gates at the decoder's self-attention only."""
    site = SITES[kind]
    ungated = dataclasses.replace(site, gated=False) if hasattr(site.options, "gated") else site
    return preset(
        "tiny",
        vocab_size=VOCAB,
        encoder_attention=ungated,
        decoder_attention=site,
        cross_attention=ungated,
        max_length=32,
        **overrides,
    )


@pytest.mark.parametrize("kind", tiered(list(SITES), {"taylor", "gla"}))
def test_decoding_equals_teacher_forcing(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(1, (2, 9))
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["taylor", "gated_rfa", "hedgehog"])
def test_encoder_decoder_decoding_equals_teacher_forcing(kind):
    model = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    source = tokens(3, (2, 11)).at[1, 8:].set(0)  # the second source is padded
    target = tokens(4, (2, 6))
    stepped = step_by_step(model, target, encode(model, source)[2])
    np.testing.assert_allclose(stepped, forward(model, source, target), rtol=1e-4, atol=1e-4)


def test_the_gate_decays_the_state():
    """A gate closed to 0 forgets everything before a token: its output depends on it alone."""
    model = Decoder(config("gated_rfa"), rngs=nnx.Rngs(0))
    for layer in model.stack.layers:
        gate = layer.self_attention.core.gate
        gate.kernel[...] = jnp.zeros_like(gate.kernel[...])
        gate.bias[...] = jnp.full_like(gate.bias[...], -30.0)  # g = sigmoid(-30): nothing is kept
    sequence = tokens(5, (1, 8))
    changed = sequence.at[:, :4].set(tokens(6, (1, 4)))  # other earlier tokens
    # Each layer's attention now sees its own token only, so position 7 depends on token 7 alone
    # (and on its position through the embedding).
    np.testing.assert_allclose(forward(model, changed)[:, 7], forward(model, sequence)[:, 7], rtol=1e-5, atol=1e-5)


def test_gated_rfa_is_the_papers_recurrence():
    """S_t = g_t S_{t-1} + (1 - g_t) φ(k_t)v_tᵀ (and z likewise) with g_t = sigmoid(w·x_t + b) and φ the random
    Fourier features of σ ⊙ k/|k|: the site equals the float64 reference with the model's own parameters."""
    attention = Decoder(config("gated_rfa"), rngs=nnx.Rngs(0)).stack.layers[0].self_attention
    core = attention.core
    core.gate.bias[...] = jnp.zeros_like(core.gate.bias[...])  # gates spread around 1/2: both terms matter
    x = jax.random.normal(jax.random.key(2), (2, 9, 32))
    mask = jnp.arange(9)[None] >= jnp.array([[0], [3]])  # the second sequence left-padded
    positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
    out = attention(x, key_mask=mask, q_positions=positions, k_positions=positions)
    q, k, v = (np.asarray(layer(x)) for layer in (attention.query, attention.key, attention.value))
    logits = np.asarray(core.gate(x), np.float64)  # [batch, L, heads]
    expected = references.kernelized_attention(
        q,
        k,
        v,
        "rfa",
        np.asarray(core.projection[...]),
        keep_k=np.asarray(mask),
        causal=True,
        log_decay=-np.log1p(np.exp(-logits)),
        sigma=np.asarray(core.learned_params["sigma"][...])[:, 0],
        key_log_weight=np.swapaxes(-np.log1p(np.exp(logits)), 1, 2),
    )
    np.testing.assert_allclose(out, attention.out(jnp.asarray(expected, jnp.float32)), rtol=1e-4, atol=1e-5)


def test_a_gate_per_feature_is_gated_linear_attentions_recurrence():
    """S_t = diag(g_t) S_{t-1} + φ(k_t)v_tᵀ with g_t = sigmoid(W x_t + b), one gate per head and feature of the map
    (Yang et al., ICML 2024): the site equals the float64 reference with the model's own gate; the gate trains."""
    attention = Decoder(config("gla"), rngs=nnx.Rngs(0)).stack.layers[0].self_attention
    core = attention.core
    core.gate.bias[...] = jnp.zeros_like(core.gate.bias[...])  # gates spread around 1/2
    x = jax.random.normal(jax.random.key(2), (2, 9, 32))
    mask = jnp.arange(9)[None] >= jnp.array([[0], [3]])
    positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
    out = attention(x, key_mask=mask, q_positions=positions, k_positions=positions)
    q, k, v = (np.asarray(layer(x)) for layer in (attention.query, attention.key, attention.value))
    logits = np.asarray(core.gate(x), np.float64).reshape(2, 9, 4, 16)  # [batch, L, heads, F]
    expected = references.kernelized_attention(
        q,
        k,
        v,
        "positive",
        np.asarray(core.projection[...]),
        keep_k=np.asarray(mask),
        causal=True,
        log_decay=-np.log1p(np.exp(-logits)),
    )
    np.testing.assert_allclose(out, attention.out(jnp.asarray(expected, jnp.float32)), rtol=1e-4, atol=1e-5)

    def loss(site):
        return jnp.sum(site(x, key_mask=mask, q_positions=positions, k_positions=positions) ** 2)

    assert float(jnp.abs(nnx.grad(loss)(attention)["core"]["gate"]["kernel"][...]).max()) > 0


@pytest.mark.parametrize("kind", ["gated_rfa", "hedgehog"])
def test_learned_maps_and_gates_are_trained_parameters(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    core = model.stack.layers[0].self_attention.core
    learned = {"gated_rfa": ("sigma",), "hedgehog": ("weight", "bias")}[kind]
    assert all(isinstance(core.learned_params[name], nnx.Param) for name in learned)
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    before = {name: np.asarray(core.learned_params[name][...]) for name in learned}
    sequence = tokens(7, (2, 9))

    @nnx.jit
    def train_step(model, optimizer, sequence):
        def loss(model):
            logits = model(sequence[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, sequence[:, 1:]).mean()

        grads = nnx.grad(loss)(model)
        optimizer.update(model, grads)
        return grads

    grads = train_step(model, optimizer, sequence)
    for name in learned:
        assert float(jnp.max(jnp.abs(grads.stack.layers[0].self_attention.core.learned_params[name][...]))) > 0
        assert not np.allclose(core.learned_params[name][...], before[name])
    if kind == "gated_rfa":
        assert float(jnp.max(jnp.abs(grads.stack.layers[0].self_attention.core.gate.kernel[...]))) > 0


def test_hedgehog_starts_from_the_identity():
    core = Decoder(config("hedgehog"), rngs=nnx.Rngs(0)).stack.layers[0].self_attention.core
    weight = core.learned_params["weight"][...]
    assert weight.shape == (4, 1, 8, 8)  # [heads, 1, head_dim, feature_dim]
    np.testing.assert_array_equal(weight[2, 0], np.eye(8))


def test_linformer_excludes_padded_keys():
    """Padding after the tokens: a padded source gives the outputs of the unpadded one."""
    site = preset("tiny", vocab_size=VOCAB, encoder_attention=LINFORMER, cross_attention=LINFORMER, max_length=16)
    source, target = tokens(7, (1, 6)), tokens(8, (1, 5))
    padded = jnp.concatenate([source, jnp.zeros((1, 4), source.dtype)], axis=1)
    classifier = Encoder(site, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(forward(classifier, padded), forward(classifier, source), rtol=1e-5, atol=1e-5)
    translation = EncoderDecoder(site, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(
        forward(translation, padded, target), forward(translation, source, target), rtol=1e-5, atol=1e-5
    )
    stepped = step_by_step(translation, target, encode(translation, padded)[2])  # cross-attention while decoding
    np.testing.assert_allclose(stepped, forward(translation, source, target), rtol=1e-4, atol=1e-4)


def test_linformer_equals_softmax_over_projected_keys():
    """Against the formula: softmax(Q(E K)ᵀ/√d)(F V) with the padded keys and values zeroed."""
    site = preset("tiny", vocab_size=VOCAB, encoder_attention=LINFORMER, max_length=16)
    attention = Encoder(site, rngs=nnx.Rngs(0)).encoder.layers[0].attention
    x = jax.random.normal(jax.random.key(1), (2, 10, 32))
    mask = jnp.arange(10)[None] < jnp.array([[10], [7]])
    positions = jnp.broadcast_to(jnp.arange(10), (2, 10))
    out = attention(x, key_mask=mask, q_positions=positions, k_positions=positions)
    q, k, v = (np.asarray(layer(x), np.float64) for layer in (attention.query, attention.key, attention.value))
    E, F = (
        np.asarray(p[...], np.float64)[:, :10] for p in (attention.core.key_projection, attention.core.value_projection)
    )
    keep = np.asarray(mask)[:, :, None, None]
    k, v = np.einsum("nl,blhd->bnhd", E, k * keep), np.einsum("nl,blhd->bnhd", F, v * keep)
    logits = np.einsum("bqhd,bnhd->bhqn", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.asarray(attention.out(jnp.asarray(np.einsum("bhqn,bnhd->bqhd", weights, v), jnp.float32)))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_a_fourier_site_is_the_formula_on_its_projections_and_its_cross_attention_decodes():
    """Inside the encoder: the float64 product formula on the site's own q, k, v with key padding; in an
    encoder-decoder, decoding token by token (KV cache, cross-attention over a padded source) equals the full pass."""
    attention = Encoder(config("fourier"), rngs=nnx.Rngs(0)).encoder.layers[0].attention
    x = jax.random.normal(jax.random.key(1), (2, 10, 32))
    mask = jnp.arange(10)[None] < jnp.array([[10], [7]])
    positions = jnp.broadcast_to(jnp.arange(10), (2, 10))
    out = attention(x, key_mask=mask, q_positions=positions, k_positions=positions)
    q, k, v = (np.asarray(layer(x), np.float64) for layer in (attention.query, attention.key, attention.value))
    weighted = references.fourier_integral_attention(q, k, v, 1.5, keep_k=np.asarray(mask))
    expected = np.asarray(attention.out(jnp.asarray(weighted, jnp.float32)))
    # Signed weights: where Σ|w| is ~70 times |Σw| (measured at R = 1.5 in these models), float32 rounding is
    # amplified as much, so the tolerances are 10x the other kinds'.
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-4)
    model = EncoderDecoder(config("fourier"), rngs=nnx.Rngs(0))
    source, target = tokens(3, (2, 11)).at[1, 8:].set(0), tokens(4, (2, 6))
    stepped = step_by_step(model, target, encode(model, source)[2])
    # Decoding sums the same signed weights in another order; at the worst-conditioned query that alone moves the
    # logits by up to 2.2e-3 when XLA:CPU compiles at optimization level 0 (as the suite does) on AVX-512 cores.
    np.testing.assert_allclose(stepped, forward(model, source, target), rtol=1e-3, atol=5e-3)


def test_linformer_refuses_longer_inputs_and_causal_use():
    classifier = Encoder(preset("tiny", vocab_size=VOCAB, encoder_attention=LINFORMER, max_length=8), rngs=nnx.Rngs(0))
    attention, x = classifier.encoder.layers[0].attention, jnp.ones((1, 12, 32))
    positions = jnp.broadcast_to(jnp.arange(12), (1, 12))
    with pytest.raises(ValueError, match=r"linformer was built for sequences of at most max_length = 8.*got 12"):
        attention(x, key_mask=jnp.ones((1, 12), bool), q_positions=positions, k_positions=positions)
    with pytest.raises(ValueError, match=r"decoder_attention: linformer .* cannot be causal"):
        preset("tiny", vocab_size=VOCAB, decoder_attention=LINFORMER)


def test_a_gate_at_a_bidirectional_site_or_without_a_kernel_is_refused():
    with pytest.raises(ValueError, match="encoder_attention: gated=True decays a causal state"):
        preset("tiny", vocab_size=VOCAB, encoder_attention=SITES["gated_rfa"])
    for kind in ("softmax", "linformer"):
        with pytest.raises(TypeError, match=f"kind '{kind}' has no option \\['gated'\\]"):
            Site(kind, gated=True)
