"""DeltaNet, Gated DeltaNet, sliding windows and hybrid stacks inside rfa's models: the delta-rule site is the
papers' layer (checked against NumPy with the model's own parameters), decoding equals teacher forcing for each
kind and through a mixed stack, padding writes nothing, a hybrid stack trains, and misuse is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import references
from flax import nnx
from helpers import tiered
from model_helpers import VOCAB, decode_step, forward, next_token_step, step_by_step, tokens

import rfa
from rfa.models import Decoder, Site, preset, redraw_projections
from rfa.models.decoding import generate

SITES = {
    "deltanet": Site("deltanet", chunk_size=4),
    "gated_deltanet": Site("gated_deltanet", chunk_size=4),
    "gated_deltanet_positive": Site("gated_deltanet", num_features=16, chunk_size=4, qk_map="positive"),
    "kda": Site("kda", chunk_size=4),
    "sliding_window": Site("sliding_window", window=3),  # a window of 3 tokens, shorter than the sequence
}
KDA_POSITIVE = Site("kda", num_features=16, chunk_size=4, qk_map="positive")  # KDA's decay over the map's F channels
HYBRID = (SITES["gated_deltanet"], Site(), SITES["sliding_window"])


def config(kind, **overrides):
    site = HYBRID if kind == "hybrid" else KDA_POSITIVE if kind == "kda_positive" else SITES[kind]
    return preset("tiny", vocab_size=VOCAB, decoder_attention=site, max_length=32, **overrides)


@pytest.mark.parametrize("kind", tiered([*SITES, "hybrid"], {"hybrid"}))  # the fast tier: the hybrid's three kinds
def test_decoding_equals_teacher_forcing(kind):
    model = Decoder(config(kind, num_decoder_layers=3), rngs=nnx.Rngs(0))
    sequence = tokens(1, (2, 11))  # the next test's shape: its compiled forward and decode_step
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


PRESET_STACKS = ("kimi_linear_tiny", "qwen3_next_tiny")


@pytest.mark.parametrize("kind", tiered([*SITES, "hybrid", *PRESET_STACKS], {"hybrid", "qwen3_next_tiny"}))
def test_a_prompt_then_decoding_equals_teacher_forcing(kind):
    """A prompt of 5 tokens in one parallel pass, then 6 more decoded: every layer's cache continues the pass."""
    if kind in PRESET_STACKS:
        model = Decoder(preset(kind, vocab_size=VOCAB, max_length=32), rngs=nnx.Rngs(0))
    else:
        model = Decoder(config(kind, num_decoder_layers=3), rngs=nnx.Rngs(0))
    sequence = tokens(7, (2, 11))
    logits, cache = nnx.jit(lambda model, prompt: model.prefill(prompt, 11))(model, sequence[:, :5])
    stepped = [logits]
    for t in range(5, 10):
        logits, cache = decode_step(model, sequence[:, t], cache, jnp.asarray(t), None)
        stepped.append(logits)
    np.testing.assert_allclose(jnp.stack(stepped, 1), forward(model, sequence)[:, 4:10], rtol=1e-4, atol=1e-4)


def _core_name(site):
    """The core of an AttentionSite, or the site itself where it owns its projections (the delta rule)."""
    return type(site.core if isinstance(site, rfa.models.AttentionSite) else site).__name__


def _rotary(x, positions, base):
    """RoFormer's rotation of the halves ``(x_i, x_{i+d/2})`` by ``position · base^{-2i/d}``."""
    half = x.shape[-1] // 2
    angle = positions[:, :, None, None] * base ** (-np.arange(half) / half)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle), x1 * np.sin(angle) + x2 * np.cos(angle)], -1)


def test_a_layer_of_its_own_heads_grouped_keys_an_output_gate_and_a_rotary_base_is_the_formula():
    """The Qwen3-Next preset's exact layer: 4 query heads over 2 key/value heads (heads 0-1 read key head 0, 2-3
    head 1), rotary positions of base 10⁷, causal softmax, the output times sigmoid(W_g x) — in NumPy from its
    parameters, and a cache of its own heads' keys."""
    model = Decoder(preset("qwen3_next_tiny", vocab_size=VOCAB, max_length=32), rngs=nnx.Rngs(0))
    site = model.stack.layers[3].self_attention
    x = jax.random.normal(jax.random.key(4), (2, 7, 32))
    positions = jnp.broadcast_to(jnp.arange(7), (2, 7))
    out = site(x, key_mask=jnp.ones((2, 7), bool), q_positions=positions, k_positions=positions)

    x64, p64 = np.asarray(x, np.float64), np.asarray(positions, np.float64)

    def project(layer):
        return np.einsum("bld,dhk->blhk", x64, np.asarray(layer.kernel[...], np.float64)) + np.asarray(layer.bias[...])

    q, k, v = _rotary(project(site.query), p64, 1e7), _rotary(project(site.key), p64, 1e7), project(site.value)
    k, v = np.repeat(k, 2, axis=2), np.repeat(v, 2, axis=2)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(8) + np.where(np.tri(7), 0.0, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    o = np.einsum("bhqk,bkhd->bqhd", weights / weights.sum(-1, keepdims=True), v) * _sigmoid(project(site.gate))
    expected = np.einsum("bqhd,hdo->bqo", o, np.asarray(site.out.kernel[...], np.float64)) + np.asarray(site.out.bias)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    assert site.key.kernel.shape == (32, 2, 8) and model.init_cache(2, 20)[0]["self"]["state"].shape == (2, 4, 16, 32)


def test_a_hybrid_stack_cycles_its_pattern_and_keeps_a_cache_of_each_kind():
    model = Decoder(config("hybrid", num_decoder_layers=4), rngs=nnx.Rngs(0))
    kinds = [_core_name(layer.self_attention) for layer in model.stack.layers]
    assert kinds == ["DeltaRuleCore", "SoftmaxCore", "SlidingWindowCore", "DeltaRuleCore"]
    caches = model.init_cache(2, 20)
    assert [sorted(cache["self"]) for cache in caches] == [
        ["conv", "state"],
        ["k", "mask", "v"],
        ["count", "k", "keep", "v"],
        ["conv", "state"],
    ]
    assert caches[0]["self"]["state"].shape == (2, 4, 8, 8) and caches[2]["self"]["k"].shape == (2, 3, 4, 8)


@pytest.mark.parametrize("stack", tiered(["hybrid", *PRESET_STACKS], {"hybrid"}))
def test_a_hybrid_stack_trains(stack):
    """Thirty Adam steps on one batch of a copy task lower the loss by half: gradients reach every kind (the Kimi
    Linear preset: three KDA layers to one exact; the Qwen3-Next preset: three Gated DeltaNet layers with grouped
    value heads to one gated exact layer with grouped-query attention)."""
    if stack in PRESET_STACKS:
        model = Decoder(preset(stack, vocab_size=VOCAB, max_length=32), rngs=nnx.Rngs(0))
        kinds = [_core_name(layer.self_attention) for layer in model.stack.layers]
        assert kinds == ["DeltaRuleCore"] * 3 + ["SoftmaxCore"]
    else:
        model = Decoder(config(stack, num_decoder_layers=3), rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    sequence = tokens(2, (4, 12))

    losses = [float(next_token_step(model, optimizer, sequence)) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0], losses


def _silu(x):
    return x / (1 + np.exp(-x))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _low_rank(layers, x):
    """``x W₁ W₂ (+ b₂)`` in float64 from an ``nnx.Sequential`` of two linear maps."""
    first, second = layers.layers
    y = x @ np.asarray(first.kernel[...], np.float64) @ np.asarray(second.kernel[...], np.float64)
    return y if second.bias is None else y + np.asarray(second.bias[...], np.float64)


@pytest.mark.parametrize("kind", tiered(["gated_deltanet_positive", "kda_positive"], {"kda_positive"}))
def test_the_site_is_the_kernelized_delta_rule(kind):
    """A model's site with ``qk_map``: the papers' layer (``tests/attention/test_fla_layers.py`` holds it to fla's)
    with positive random features of q and k (scaled by d^-1/4), L2-normalized, in place of SiLU and the L2 norm;
    KDA's decay over the map's F channels — in NumPy from the model's parameters, left padding included."""
    site = Decoder(config(kind), rngs=nnx.Rngs(0)).stack.layers[0].self_attention
    layer = site.layer
    x = jax.random.normal(jax.random.key(2), (2, 9, 32))
    mask = jnp.arange(9)[None] >= jnp.array([[0], [3]])  # the second sequence left-padded
    positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
    out = site(x, key_mask=mask, q_positions=positions, k_positions=positions)

    keep = np.asarray(mask, np.float64)[..., None]
    x64 = np.asarray(x, np.float64)
    qkv = np.concatenate(
        [x64 @ np.asarray(p.kernel[...], np.float64) for p in (layer.q_proj, layer.k_proj, layer.v_proj)], -1
    )
    qkv = qkv * keep  # [q | k | v], each [heads · d]
    w = np.concatenate(
        [np.asarray(c.weight[...], np.float64) for c in (layer.q_conv1d, layer.k_conv1d, layer.v_conv1d)], -1
    )
    padded = np.concatenate([np.zeros((2, 3, qkv.shape[-1])), qkv], 1)
    conv = np.stack([sum(w[j] * padded[:, t + j] for j in range(4)) for t in range(9)], 1)
    q, k, v = (y.reshape(2, 9, 4, 8) for y in np.split(conv, 3, axis=-1))
    v = _silu(v)
    W = np.asarray(layer.projection[...], np.float64)
    q, k = (references.positive(y * 8**-0.25, W) for y in (q, k))
    q, k = (y / np.sqrt(np.sum(y**2, axis=-1, keepdims=True)) for y in (q, k))
    beta = _sigmoid(x64 @ np.asarray(layer.b_proj.kernel[...], np.float64)) * keep
    A = np.exp(np.asarray(layer.A_log[...], np.float64))
    if kind.startswith("gated"):
        rate = np.log1p(np.exp(x64 @ np.asarray(layer.a_proj.kernel[...], np.float64) + np.asarray(layer.dt_bias[...])))
        log_decay = -A * rate * keep
        gate = _silu(x64 @ np.asarray(layer.g_proj.kernel[...], np.float64))
    else:
        rate = np.log1p(np.exp(_low_rank(layer.f_proj, x64) + np.asarray(layer.dt_bias[...], np.float64)))
        log_decay = -A[:, None] * rate.reshape(q.shape) * keep[..., None]  # [batch, L, heads, F]
        gate = _sigmoid(_low_rank(layer.g_proj, x64))
    o, _ = references.delta_rule(q / np.sqrt(q.shape[-1]), k, v, beta, log_decay)
    o = o / np.sqrt(np.mean(o**2, axis=-1, keepdims=True) + 1e-5) * np.asarray(layer.o_norm.scale[...])
    o = (o * gate.reshape(o.shape)).reshape(2, 9, 32) @ np.asarray(layer.o_proj.kernel[...], np.float64)
    np.testing.assert_allclose(out, o, rtol=1e-4, atol=1e-5)


@nnx.jit(static_argnames="max_length")
def _prefill(site, x, keep, max_length):
    return site.prefill(
        x, key_mask=keep, positions=jnp.broadcast_to(jnp.arange(x.shape[1]), keep.shape), max_length=max_length
    )


@nnx.jit
def _decode(site, x, cache, position, keep):
    return site.decode_step(x, cache, position, keep)


@pytest.mark.parametrize("kind", tiered(["sliding_window", "kda"], {"sliding_window"}))
def test_padded_prompts_then_decoding_equal_each_prompt_alone(kind):
    """A site's prompt pass over a prompt of 5 tokens padded on both sides (1 before, 2 after) beside one of 8,
    then a padding token in the row that has ended, then two tokens, equals each prompt's alone: the window's ring
    holds each row's last kept tokens, the delta rule's convolution its last kept inputs; the padding token leaves
    the row's cache as it was."""
    site = Decoder(config(kind), rngs=nnx.Rngs(0)).stack.layers[0].self_attention
    x = jax.random.normal(jax.random.key(3), (2, 11, 32))
    keep = jnp.array([[False] + [True] * 5 + [False] * 2, [True] * 8])
    _, cache = _prefill(site, x[:, :8], keep, 11)
    _, after = _decode(site, x[:, 8], cache, jnp.asarray(8), jnp.array([False, True]))
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[0], b[0]), after, cache)
    out = []
    for t in (9, 10):
        y, after = _decode(site, x[:, t], after, jnp.asarray(t), jnp.array([True, True]))
        out.append(y)
    for row, prompt in enumerate((x[:1, 1:6], x[1:, :9])):  # row 1's with its 9th token, which row 0 skipped
        _, alone = _prefill(site, prompt, jnp.ones(prompt.shape[:2], bool), 11)
        for t, y in zip((9, 10), out, strict=True):
            expected, alone = _decode(site, x[row : row + 1, t], alone, jnp.asarray(t), jnp.array([True]))
            np.testing.assert_allclose(y[row : row + 1], expected, rtol=1e-5, atol=1e-5)


def test_the_kernelized_delta_rule_keeps_a_state_of_f_features_and_is_redrawn():
    model = Decoder(config("gated_deltanet_positive"), rngs=nnx.Rngs(0))
    assert model.init_cache(2, 20)[0]["self"]["state"].shape == (2, 4, 16, 8)
    sequence = tokens(8, (2, 9))
    before = forward(model, sequence)
    assert redraw_projections(model, jax.random.key(3)) == 2
    assert float(jnp.max(jnp.abs(forward(model, sequence) - before))) > 1e-5


def test_a_bidirectional_site_a_second_gate_or_a_window_across_sequences_is_refused():
    with pytest.raises(ValueError, match="encoder_attention: the delta rule updates a state token by token"):
        preset("tiny", vocab_size=VOCAB, encoder_attention=Site("deltanet"))
    with pytest.raises(TypeError, match=r"kind 'gated_deltanet' has no option \['gated'\]"):  # its decay is its own
        Site("gated_deltanet", gated=True)
    with pytest.raises(ValueError, match=r"cross_attention: kind 'sliding_window' cannot run cross attention"):
        preset("tiny", vocab_size=VOCAB, cross_attention=Site("sliding_window", window=4))
    with pytest.raises(TypeError, match=r"kind 'softmax' has no option \['qk_map'\]"):
        Site(qk_map="positive")
    with pytest.raises(rfa.InputError, match="qk_map must be None or a registered estimator"):  # rfa's one type
        Site("deltanet", qk_map="silu")
    with pytest.raises(rfa.InputError, match="qk_map='oprf' needs parameters fitted"):
        preset("tiny", vocab_size=VOCAB, decoder_attention=Site("deltanet", qk_map="oprf"))
    with pytest.raises(TypeError, match="a non-empty tuple of them"):
        preset("tiny", vocab_size=VOCAB, decoder_attention=())
    with pytest.raises(rfa.InputError, match="gives 3 layers' attention for a stack of 2"):
        preset("tiny", vocab_size=VOCAB, decoder_attention=(Site(),) * 3)
    with pytest.raises(rfa.InputError, match="num_kv_heads = 3 must divide the heads"):
        preset("tiny", vocab_size=VOCAB, decoder_attention=Site(num_kv_heads=3))
    with pytest.raises(TypeError, match=r"kind 'gated_deltanet' has no option \['output_gate'\]"):  # its own layer
        Site("gated_deltanet", output_gate=True)
    with pytest.raises(rfa.InputError, match=r"num_v_heads \(6\) must be a multiple of num_heads \(4\)"):
        preset(
            "tiny",
            vocab_size=VOCAB,
            decoder_attention=Site("kda", num_v_heads=6),
        )
    model = Decoder(config("sliding_window"), rngs=nnx.Rngs(0))
    right_padded = jnp.array([[3, 4, 5], [3, 4, model.config.pad_id]])
    with pytest.raises(rfa.InputError, match="a prompt ends with padding"):
        model.prefill(right_padded)
    with pytest.raises(rfa.InputError, match="a prompt ends with padding"):
        generate(model, right_padded, max_new_tokens=2)
