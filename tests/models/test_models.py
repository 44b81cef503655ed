"""NNX Transformers: decoding with caches equals teacher forcing, causality, padding, kernels vs exact."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from flax import nnx
from model_helpers import VOCAB, decode_step, encode, forward, packed_and_alone, step_by_step, tokens

import rfa
from rfa.models import (
    AttentionInputs,
    AttentionSite,
    Decoder,
    Encoder,
    EncoderDecoder,
    Site,
    decoding,
    preset,
    redraw_projections,
)
from rfa.models.transformer import EncoderStack

KINDS = {
    "softmax": Site(),
    "positive": Site("positive", num_features=32),
    "trig": Site("trig", num_features=32, projection_kind="iid"),
    "hyperbolic": Site("hyperbolic", num_features=16),
    "oprf": Site("oprf", num_features=32, feature_params=(("phi_sq", 1.0),)),
    "saderf": Site("saderf", num_features=32, feature_params=(("A", -0.05),)),
    "relu": Site("relu", num_features=32),
    "elu": Site("elu"),
}


def config(kind="softmax", positional="sinusoidal", **overrides):
    attention = KINDS[kind]
    return preset(
        "tiny",
        vocab_size=VOCAB,
        positional=positional,
        encoder_attention=attention,
        decoder_attention=attention,
        cross_attention=attention,
        **overrides,
    )


@functools.partial(nnx.jit, static_argnames="max_length")
def prefill(model, prompt, max_length):
    """The decoder's prompt pass, compiled once per model structure and shared by the tests."""
    return model.prefill(prompt, max_length)


@functools.partial(nnx.jit, static_argnames="new_tokens")
def token_by_token(model, prompt, new_tokens):
    """Greedy decoding that consumes the prompt with one decode_step per token: prefill's reference.

    Returns the new tokens, the logits each was chosen from and the caches after the prompt.
    """

    def consume(cache, token_position):
        token, position = token_position
        logits, cache = model.decode_step(token, cache, position)
        return cache, logits

    cache = model.init_cache(prompt.shape[0], prompt.shape[1] + new_tokens)
    prompt_cache, logits = jax.lax.scan(consume, cache, (prompt.T, jnp.arange(prompt.shape[1])))

    def greedy(carry, position):
        cache, logits = carry
        token = jnp.argmax(logits, -1)
        next_logits, cache = model.decode_step(token, cache, position)
        return (cache, next_logits), (token, logits)

    positions = prompt.shape[1] + jnp.arange(new_tokens)
    _, (new, chosen_from) = jax.lax.scan(greedy, (prompt_cache, logits[-1]), positions)
    return new.T, jnp.swapaxes(chosen_from, 0, 1), prompt_cache


@pytest.mark.parametrize(
    "kind", [kind if kind in ("softmax", "positive") else pytest.param(kind, marks=pytest.mark.slow) for kind in KINDS]
)
def test_decoder_step_by_step_equals_teacher_forcing(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(1, (2, 9))
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_calibrated_derf_decoder_stores_its_fit_and_decodes_as_it_teacher_forces():
    """``rfa.layers.calibrating`` fits each causal site's DERF to a calibration batch; the fit is state
    that every later pass uses, token by token as in one pass."""
    attention = Site("sderf", num_features=16, feature_params=(("A", -0.05),))
    model = Decoder(preset("tiny", vocab_size=VOCAB, decoder_attention=attention), rngs=nnx.Rngs(0))
    sequence = tokens(3, (2, 9))
    before = forward(model, sequence)
    with rfa.layers.calibrating(model):
        model(tokens(4, (8, 12)))  # eager: the calibration batch
    fitted = nnx.state(model, rfa.layers.FittedParams)
    heads, head_dim = model.config.num_heads, model.config.head_dim
    for layer in model.stack.layers:
        params = layer.self_attention.core.fitted_params
        assert params["A"].shape == (heads, 1, head_dim)
        assert params["query_transform"].shape == (heads, 1, head_dim, head_dim)
    assert len(jax.tree.leaves(fitted)) == 3 * len(model.stack.layers)
    after = forward(model, sequence)
    assert not np.allclose(after, before, atol=1e-3)  # the calibrated parameters are used
    np.testing.assert_allclose(step_by_step(model, sequence), after, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("positional", ["learned", "rotary", "relative"])
def test_decoding_equals_teacher_forcing_for_every_positional_encoding(positional):
    kinds = ["softmax"] if positional == "relative" else ["softmax", "positive"]
    for kind in kinds:
        model = Decoder(config(kind, positional), rngs=nnx.Rngs(0))
        sequence = tokens(2, (2, 7))
        np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive", "oprf"])  # every map's recurrent state: test_decoder_step_...
def test_encoder_decoder_decoding_with_prepared_memory_equals_teacher_forcing(kind):
    # Rotary positions; at cross-attention too for an exact and a kernelized kind (off by default).
    cross_rotary = kind in ("softmax", "positive")
    model = EncoderDecoder(config(kind, "rotary", cross_attention_rotary=cross_rotary), rngs=nnx.Rngs(0))
    source = tokens(3, (2, 11)).at[1, 8:].set(0)  # the second source is padded
    target = tokens(4, (2, 6))
    stepped = step_by_step(model, target, encode(model, source)[2])
    np.testing.assert_allclose(stepped, forward(model, source, target), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_rotary_positions_at_cross_attention_are_a_per_site_flag(kind):
    x, memory = jax.random.normal(jax.random.key(28), (2, 5, 32)), jax.random.normal(jax.random.key(29), (2, 7, 32))
    mask = jnp.arange(7) < jnp.array([[7], [5]])
    q_positions, k_positions = jnp.broadcast_to(jnp.arange(5), (2, 5)), jnp.broadcast_to(jnp.arange(7), (2, 7))
    for rotary in (False, True):
        model = EncoderDecoder(config(kind, "rotary", cross_attention_rotary=rotary), rngs=nnx.Rngs(0))
        cross = model.decoder.layers[0].cross_attention
        out = cross(x, memory, key_mask=mask, q_positions=q_positions, k_positions=k_positions)
        shifted = cross(x, memory, key_mask=mask, q_positions=q_positions + 2, k_positions=k_positions + 5)
        # Rotated, q·k depends on the offset between target and source positions; unrotated, on neither.
        # Decoding equals teacher forcing either way: test_encoder_decoder_decoding_with_prepared_memory_...
        assert np.allclose(shifted, out, rtol=1e-5, atol=1e-5) != rotary


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_a_kernelized_site_with_relative_positions_is_the_biased_formula_and_trains_its_bias(causal):
    """The site's output is the float64 formula exp(b_{i-j}) φ(q_i)ᵀφ(k_j) on its own q, k, v and its learned
    bias per lag (T5 buckets), with key padding; the bias gets a gradient; a decoder refuses to decode."""
    model = (Decoder if causal else Encoder)(config("positive", "relative"), rngs=nnx.Rngs(0))
    layer = (model.stack if causal else model.encoder).layers[0]
    attention = layer.self_attention if causal else layer.attention
    x = jax.random.normal(jax.random.key(1), (2, 10, 32))
    mask = jnp.arange(10)[None] < jnp.array([[10], [7]])
    positions = jnp.broadcast_to(jnp.arange(10), (2, 10))
    out = attention(x, key_mask=mask, q_positions=positions, k_positions=positions)
    q, k, v = (np.asarray(f(x), np.float64) for f in (attention.query, attention.key, attention.value))
    bias = np.asarray(attention.core.relative.by_lag(10), np.float64)
    offsets = np.arange(10)[None, :] - np.arange(10)[:, None]  # key - query position: the buckets' argument
    np.testing.assert_allclose(bias[:, 9 - offsets], np.asarray(attention.core.relative(positions, positions))[0])
    weighted = references.kernelized_attention(
        q,
        k,
        v,
        "positive",
        np.asarray(attention.core.projection[...]),
        keep_k=np.asarray(mask),
        causal=causal,
        relative_bias=bias,
    )
    np.testing.assert_allclose(out, attention.out(jnp.asarray(weighted, jnp.float32)), rtol=1e-4, atol=1e-5)

    def loss(site):
        return jnp.sum(site(x, key_mask=mask, q_positions=positions, k_positions=positions) ** 2)

    grads = nnx.grad(loss)(attention)
    assert float(jnp.abs(grads["core"]["relative"]["embedding"]["embedding"][...]).max()) > 0
    if causal:
        with pytest.raises(ValueError, match="with positional='relative' cannot decode token by token"):
            step_by_step(model, tokens(2, (2, 5)))


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_future_tokens_never_change_earlier_outputs(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(5, (2, 9))  # the shape of test_decoder_step_by_step_...'s: the same compiled forward
    changed = sequence.at[:, 6:].set(tokens(6, (2, 3)))
    np.testing.assert_allclose(forward(model, changed)[:, :6], forward(model, sequence)[:, :6], rtol=1e-5, atol=1e-5)
    assert not np.allclose(forward(model, changed)[:, 6:], forward(model, sequence)[:, 6:])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive", "oprf"])
def test_padded_sources_give_the_outputs_of_unpadded_ones(kind):
    source, target = tokens(7, (2, 7)), tokens(8, (2, 5))  # the greedy test's shapes: its compiled forward
    padded = jnp.concatenate([source, jnp.zeros((2, 4), source.dtype)], axis=1)
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    unpadded = forward(translation, source, target)
    np.testing.assert_allclose(forward(translation, padded, target), unpadded, rtol=1e-4, atol=1e-4)
    classifier = Encoder(config(kind), rngs=nnx.Rngs(0))
    np.testing.assert_allclose(forward(classifier, padded), forward(classifier, source), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_kernelized_model_approaches_the_exact_one_as_m_grows():
    exact = Encoder(config("softmax", num_classes=5), rngs=nnx.Rngs(0))
    sequence = tokens(9, (4, 16))
    reference = forward(exact, sequence)
    errors = []
    for m in (4, 32, 512):
        attention = Site("positive", num_features=m)
        model = Encoder(preset("tiny", vocab_size=VOCAB, num_classes=5, encoder_attention=attention), rngs=nnx.Rngs(0))
        nnx.update(model, nnx.state(exact, nnx.Param))
        draws = []
        for seed in range(4):
            redraw_projections(model, jax.random.key(seed))
            draws.append(float(jnp.mean((forward(model, sequence) - reference) ** 2)))
        errors.append(np.mean(draws))
    assert errors[0] > errors[1] > errors[2], errors


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_a_padding_token_without_visible_keys_attends_to_nothing(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    # Position 0 is padding: it sees no key at all. The shape of test_decoder_step_by_step_...'s: the same programs.
    sequence = tokens(20, (2, 9)).at[:, 0].set(0)
    changed = sequence.at[:, 1:].set(tokens(21, (2, 8)))
    np.testing.assert_allclose(forward(model, changed)[:, 0], forward(model, sequence)[:, 0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


def test_redraw_policy_redraws_the_sites_that_are_due():
    every_2 = Site("positive", num_features=16, redraw_every=2)
    sites = {"encoder_attention": KINDS["positive"], "decoder_attention": every_2, "cross_attention": KINDS["softmax"]}
    model = EncoderDecoder(preset("tiny", vocab_size=VOCAB, **sites), rngs=nnx.Rngs(0))
    assert redraw_projections(model, jax.random.key(0), step=3) == 0
    assert redraw_projections(model, jax.random.key(0), step=4) == 2  # the two decoder self-attentions
    assert redraw_projections(model, jax.random.key(0)) == 4  # every kernelized site


def test_random_parameters_of_a_map_are_drawn_and_redrawn_with_the_projection():
    """Hybrid's R (``sampled``) lives beside W as a RandomProjection variable: drawn, redrawn, used, never trained."""
    model = Decoder(
        preset("tiny", vocab_size=VOCAB, decoder_attention=Site("hybrid", num_features=8)), rngs=nnx.Rngs(0)
    )
    sequence = tokens(11, (2, 6))
    first = forward(model, sequence)
    before = [np.array(w) for w in jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))]
    assert sorted(w.shape for w in before) == [(1, 8), (1, 8), (8, 8), (8, 8)]  # R and W of two layers, d_k = 8
    redraw_projections(model, jax.random.key(1))
    after = jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))
    assert all(not np.allclose(a, b) for a, b in zip(before, after, strict=True))
    assert not np.allclose(forward(model, sequence), first)


def test_redraw_changes_the_projection_and_evaluation_is_deterministic():
    model = Decoder(config("positive", dropout_rate=0.3), rngs=nnx.Rngs(0))
    model.eval()
    sequence = tokens(10, (2, 8))
    first = forward(model, sequence)
    np.testing.assert_array_equal(forward(model, sequence), first)
    before = [np.array(w) for w in jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))]
    redraw_projections(model, jax.random.key(1))
    assert not np.allclose(forward(model, sequence), first)
    params_unchanged = nnx.state(Decoder(config("positive", dropout_rate=0.3), rngs=nnx.Rngs(0)), nnx.Param)
    jax.tree.map(np.testing.assert_array_equal, nnx.state(model, nnx.Param), params_unchanged)
    after = jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))
    assert len(before) == 2 and all(not np.allclose(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_greedy_generation_after_a_prefilled_prompt_picks_the_argmax_of_teacher_forcing(kind):
    lm = Decoder(config(kind, "rotary"), rngs=nnx.Rngs(0))
    prompt = tokens(11, (2, 3)).at[1, 0].set(0)  # the second prompt starts with a padding token
    generated, logits = decoding.generate(lm, prompt, max_new_tokens=4)
    full = forward(lm, jnp.concatenate([prompt, generated], axis=1))
    np.testing.assert_allclose(logits, full[:, 2:-1], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(generated, jnp.argmax(full[:, 2:-1], -1))
    # The prompt pass gives the caches of consuming the prompt token by token: exact keys/values and mask, or
    # the kernelized state (S, z) with its reference max_j s(k_j); decoding then continues identically.
    new, new_logits, reference_cache = token_by_token(lm, prompt, new_tokens=4)
    _, cache = prefill(lm, prompt, max_length=7)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), cache, reference_cache)
    np.testing.assert_array_equal(generated, new)
    np.testing.assert_allclose(logits, new_logits, rtol=1e-5, atol=1e-5)
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    source = tokens(12, (2, 7))
    generated, logits = decoding.generate(translation, source, max_new_tokens=5, bos_id=1)
    target_in = jnp.concatenate([jnp.ones((2, 1), generated.dtype), generated[:, :-1]], axis=1)
    np.testing.assert_allclose(logits, forward(translation, source, target_in), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_beam_search_over_the_whole_vocabulary_is_exhaustive():
    lm = Decoder(config("positive"), rngs=nnx.Rngs(0))
    prompt = tokens(22, (1, 3))
    beams, scores = decoding.beam_search(lm, prompt, beam_size=VOCAB, max_new_tokens=2)
    pairs = jnp.stack(jnp.meshgrid(jnp.arange(VOCAB), jnp.arange(VOCAB), indexing="ij"), -1).reshape(-1, 2)
    sequences = jnp.concatenate([jnp.repeat(prompt, len(pairs), 0), pairs], axis=1)
    log_probs = jax.nn.log_softmax(forward(lm, sequences)[:, 2:4])
    totals = jnp.take_along_axis(log_probs, pairs[..., None], -1).sum((1, 2))
    best = jnp.argsort(-totals)[:VOCAB]
    np.testing.assert_array_equal(beams[0], pairs[best])
    np.testing.assert_allclose(scores[0], totals[best], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_beam_search_scores_are_the_penalized_log_probabilities_finished_first():
    translation = EncoderDecoder(config("softmax"), rngs=nnx.Rngs(0))
    # With eos = 7 one input's pool fills and the other's keeps one hypothesis, the rest being live ones.
    source, eos, alpha = tokens(23, (2, 5)), 7, 0.6
    beams, scores = decoding.beam_search(
        translation, source, beam_size=4, max_new_tokens=6, eos_id=eos, length_penalty=alpha
    )
    hypotheses = np.asarray(beams).reshape(8, 6)
    target_in = np.concatenate([np.ones((8, 1), hypotheses.dtype), hypotheses[:, :-1]], axis=1)
    log_probs = jax.nn.log_softmax(forward(translation, jnp.repeat(source, 4, 0), jnp.asarray(target_in)))
    token_log_probs = np.take_along_axis(np.asarray(log_probs), hypotheses[..., None], -1)[..., 0]
    finished = (hypotheses == eos).any(1)
    lengths = np.where(finished, np.argmax(hypotheses == eos, 1) + 1, 6)
    for hypothesis, length in zip(hypotheses, lengths, strict=True):
        assert np.all(hypothesis[length:] == eos), hypothesis  # eos to the end once emitted
    expected = (token_log_probs * (np.arange(6) < lengths[:, None])).sum(1) / ((5 + lengths) / 6) ** alpha
    np.testing.assert_allclose(np.asarray(scores).reshape(8), expected, rtol=1e-4, atol=1e-4)
    assert finished.sum() == 5  # finished hypotheses come first, then unfinished ones, each kind best first
    for row_finished, row_scores in zip(finished.reshape(2, 4), np.asarray(scores), strict=True):
        assert np.all(row_finished[:-1] >= row_finished[1:]), row_finished
        for kind in (True, False):
            assert np.all(np.diff(row_scores[row_finished == kind]) <= 0), row_scores


class ScriptedDecoder(Decoder):
    """The decoding protocol (prefill, decode_step) with next-token logits ``table[position, last token]``."""

    def __init__(self, table):
        self.config = preset("tiny", vocab_size=table.shape[-1], max_length=table.shape[0])
        self.table = nnx.Variable(jnp.asarray(table))

    def prefill(self, prompt, max_length=None):
        return self.table[...][prompt.shape[1] - 1, prompt[:, -1]], jnp.zeros(prompt.shape[:1])

    def decode_step(self, token, cache, position):
        return self.table[...][position, token], cache


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_the_length_penalty_steers_the_search(alpha):
    bos, eos, a, b, steps = 1, 2, 3, 4, 6
    # After bos: eos 0.35, b 0.3, a 0.2, bos 0.15; then b -> eos and a -> a a a eos, each (almost) surely.
    # With the penalty, [a, a, a, a, eos] scores log 0.2 / (10/6) = -0.97 and the pool's worst -1.05 after
    # two steps: only the bound at the longest length (log 0.2 / (11/6)) keeps the search going.
    probs = np.full((steps + 1, 5, 5), 0.2)
    probs[0, bos] = [1e-9, 0.15, 0.35, 0.2, 0.3]
    probs[1, b] = probs[4, a] = [1e-9, 1e-9, 1.0, 1e-9, 1e-9]
    probs[1:4, a] = [1e-9, 1e-9, 1e-9, 1.0, 1e-9]
    model = ScriptedDecoder(np.log(probs))
    beams, scores = decoding.beam_search(
        model, jnp.array([[bos]]), beam_size=2, max_new_tokens=steps, eos_id=eos, length_penalty=alpha
    )
    # Reference: every hypothesis that ends with eos within the steps, scored log P / ((5 + length) / 6)^alpha.
    log_probs = np.asarray(jax.nn.log_softmax(jnp.log(probs)))
    hypotheses = []
    for length in range(1, steps + 1):
        for prefix in itertools.product([0, 1, 3, 4], repeat=length - 1):
            sequence = (*prefix, eos)
            log_p = sum(log_probs[i, (bos, *prefix)[i], token] for i, token in enumerate(sequence))
            hypotheses.append((log_p / ((5 + length) / 6) ** alpha, sequence + (eos,) * (steps - length)))
    best = sorted(hypotheses, reverse=True)[:2]
    # Without the penalty [eos] and [b, eos] win; with it [a, a, a, a, eos], which a search that kept the two
    # most likely prefixes (eos and b after the first step) and only reordered its final beams would never see.
    assert best[0][1][:5] == ((a, a, a, a, eos) if alpha else (eos,) * 5)
    np.testing.assert_array_equal(beams[0], [sequence for _, sequence in best])
    np.testing.assert_allclose(scores[0], [score for score, _ in best], rtol=1e-5)


def test_beam_search_runs_one_prompt_pass_per_input(monkeypatch):
    passes = []  # (what, batch) of each prompt pass traced into the search

    def recorded(what, method):
        def wrapper(self, x, *args, **kwargs):
            passes.append((what, x.shape[0]))
            return method(self, x, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(AttentionSite, "prefill", recorded("prefill", AttentionSite.prefill))
    monkeypatch.setattr(AttentionSite, "prepare_memory", recorded("memory", AttentionSite.prepare_memory))
    monkeypatch.setattr(EncoderStack, "__call__", recorded("encoder", EncoderStack.__call__))
    inputs = tokens(26, (3, 4))  # shapes no other test decodes, so that the search is traced here

    def search(model):  # traced, not compiled: the passes are counted at trace time
        return nnx.eval_shape(lambda m: decoding.beam_search(m, inputs, beam_size=5, max_new_tokens=3), model)

    search(Decoder(config(), rngs=nnx.Rngs(0)))
    assert passes == [("prefill", 3)] * 2  # each layer's self-attention, once for the 3 prompts
    passes.clear()
    search(EncoderDecoder(config(), rngs=nnx.Rngs(0)))
    assert passes == [("encoder", 3)] + [("memory", 3)] * 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inputs": jnp.array([[1, 99]])}, r"ids outside \[0, 23\)"),
        ({"max_new_tokens": 300}, "needs 304 positions > config.max_length = 256"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an int >= 1"),
        ({"top_k": 0, "temperature": 1.0, "key": jax.random.key(0)}, r"top_k must be None or in \[1, 23\]"),
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"eos_id": 23}, r"eos_id must be a token of \[0, 23\)"),
    ],
)
def test_generate_rejects_bad_arguments(kwargs, message):
    lm = Decoder(config(), rngs=nnx.Rngs(0))
    arguments = {"inputs": tokens(24, (1, 4)), "max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        decoding.generate(lm, **arguments)


def test_decoding_refuses_training_mode_padding_bos_and_bad_beams():
    translation = EncoderDecoder(config(dropout_rate=0.1), rngs=nnx.Rngs(0))
    source = tokens(25, (1, 4))
    with pytest.raises(ValueError, match=r"training mode .* call model.eval\(\)"):
        decoding.generate(translation, source, max_new_tokens=2)
    translation.eval()
    with pytest.raises(ValueError, match="bos_id = 0 is the padding token"):
        decoding.generate(translation, source, max_new_tokens=2, bos_id=0)
    with pytest.raises(ValueError, match=r"beam_size must be an int in \[1, 23\]"):
        decoding.beam_search(translation, source, beam_size=0, max_new_tokens=2)
    with pytest.raises(TypeError, match="length_penalty must be a real number"):
        decoding.beam_search(translation, source, beam_size=2, max_new_tokens=2, length_penalty="0.6")
    with pytest.raises(ValueError, match="length_penalty must be finite, got nan"):
        decoding.beam_search(translation, source, beam_size=2, max_new_tokens=2, length_penalty=float("nan"))
    with pytest.raises(TypeError, match="needs a Decoder, an EncoderDecoder or a decoder-only family"):
        decoding.generate(Encoder(config(), rngs=nnx.Rngs(0)), source, max_new_tokens=2)


@pytest.mark.slow
def test_sampling_is_reproducible_and_top_1_is_greedy():
    lm = Decoder(config("positive", "rotary"), rngs=nnx.Rngs(0))
    prompt = tokens(13, (2, 3))  # the model and shapes of the greedy test's: its compiled greedy generate
    greedy, _ = decoding.generate(lm, prompt, max_new_tokens=4)
    top1, _ = decoding.generate(lm, prompt, max_new_tokens=4, temperature=0.7, top_k=1, key=jax.random.key(0))
    np.testing.assert_array_equal(top1, greedy)
    a, _ = decoding.generate(lm, prompt, max_new_tokens=4, temperature=1.5, key=jax.random.key(1))
    b, _ = decoding.generate(lm, prompt, max_new_tokens=4, temperature=1.5, key=jax.random.key(1))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        decoding.generate(lm, prompt, max_new_tokens=2, temperature=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_beam_search_finds_at_least_the_greedy_score(kind):
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    source = tokens(14, (2, 7))  # the shape of the greedy test's source: the same compiled generate
    greedy, logits = decoding.generate(translation, source, max_new_tokens=5)
    greedy_score = jnp.take_along_axis(jax.nn.log_softmax(logits), greedy[..., None], -1).sum((1, 2))
    beams, scores = decoding.beam_search(translation, source, beam_size=3, max_new_tokens=5)
    assert beams.shape == (2, 3, 5) and bool(jnp.all(scores[:, :-1] >= scores[:, 1:]))
    assert bool(jnp.all(scores[:, 0] >= greedy_score - 1e-4))
    one, one_scores = decoding.beam_search(translation, source, beam_size=1, max_new_tokens=5)
    np.testing.assert_array_equal(one[:, 0], greedy)
    np.testing.assert_allclose(one_scores[:, 0], greedy_score, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"d_model": 30}, ValueError, "d_model = 30 is not divisible by num_heads = 4"),
        (
            {"positional": "relative", "decoder_attention": Site("positive", num_features=16, gated=True)},
            ValueError,
            "cannot be combined with gated=True",
        ),
        ({"decoder_attention": Site("oprf", num_features=16)}, ValueError, r"needs feature_params \['phi_sq'\]"),
        ({"positional": "alibi"}, ValueError, "positional must be one of"),
        ({"norm": "sandwich"}, ValueError, "norm must be one of"),
        ({"cross_attention": "positive"}, TypeError, "cross_attention must be an rfa.models.Site"),
        (
            {"positional": "relative", "relative_buckets": 32, "relative_max_distance": 8},
            ValueError,
            "relative_max_distance >= relative_buckets",
        ),
        ({"pad_id": 23}, ValueError, r"pad_id must be a token of the vocabulary \[0, 23\)"),
        ({"cross_attention_rotary": 1}, TypeError, "cross_attention_rotary must be a bool, got 1"),
        ({"cross_attention_rotary": True}, ValueError, "needs positional='rotary', got positional='sinusoidal'"),
        (
            {"encoder_attention": Site("oprf", num_features=16), "sequence_axis": "sequence"},
            ValueError,
            r"fits feature_params \['phi_sq'\] to the whole sequence, which a device holding one block",
        ),
        ({"sequence_axis": ""}, TypeError, "sequence_axis must be a mesh axis name or None, got ''"),
    ],
)
def test_inconsistent_configs_are_rejected(overrides, error, message):
    with pytest.raises(error, match=message):
        preset("tiny", vocab_size=VOCAB, **overrides)


def test_unknown_attention_kinds_and_presets_are_rejected():
    with pytest.raises(
        rfa.InputError,
        match=r"attention must be a kind or a variant, one of \[.*'exact'.*'positive'.*'cosine'\. Register your "
        r"own kind with rfa.layers.register_attention_kind, or an estimator with rfa.register_estimator; from a "
        r"command, in a module listed in config.modules\.",
    ):
        Site("cosine")
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        preset("huge", vocab_size=VOCAB)


def test_wrong_tokens_raise_clear_errors():
    model = Decoder(config(), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"ids outside \[0, 23\): min 0, max 23"):
        model(jnp.array([[0, 23]]))
    with pytest.raises(TypeError, match="integer array of token ids"):
        model(jnp.ones((1, 3)))
    with pytest.raises(ValueError, match=r"shape \[batch, length\]"):
        model(jnp.ones((3,), jnp.int32))
    with pytest.raises(ValueError, match=r"length 300 > config\.max_length = 256"):
        model(jnp.ones((1, 300), jnp.int32))


def test_bad_inputs_are_refused_under_jit_too():
    """Token ids outside the vocabulary (a negative one too) and a decoding position past the cache, when the
    program runs; a mask of the wrong shape or kind (an additive one) and packed ids of the wrong shape, when it
    traces."""
    model = Decoder(config(), rngs=nnx.Rngs(0))
    run, step = rfa.checks.checked(forward), rfa.checks.checked(decode_step)
    for bad in ([[3, 23]], [[3, -1]]):
        with pytest.raises(rfa.InputError, match=r"tokens holds ids outside \[0, 23\)"):
            run(model, jnp.array(bad))
    cache = model.init_cache(1, 4)
    with pytest.raises(rfa.InputError, match=r"token holds ids outside \[0, 23\): min 23"):
        step(model, jnp.array([23]), cache, jnp.asarray(0), None)
    with pytest.raises(rfa.InputError, match=r"position 4 is outside the cache's slots \[0, 4\)"):
        step(model, jnp.array([3]), cache, jnp.asarray(4), None)
    with pytest.raises(rfa.InputError, match=r"position 256 is outside config.max_length \[0, 256\)"):
        step(model, jnp.array([3]), cache, jnp.asarray(256), None)
    two = jnp.array([[3, 4]])
    with pytest.raises(rfa.InputError, match="additive mask"):
        nnx.jit(lambda m, t: m(t, key_mask=jnp.zeros((1, 2))))(model, two)
    with pytest.raises(rfa.InputError, match=r"key_mask must be a boolean array of the tokens' shape \(1, 2\)"):
        nnx.jit(lambda m, t: m(t, key_mask=jnp.ones((1, 1, 2), bool)))(model, two)
    with pytest.raises(rfa.InputError, match="segment_ids must be an integer array of the tokens' shape"):
        model(two, segment_ids=jnp.ones((1, 3), jnp.int32))


@pytest.mark.slow  # 5 s, most of it the eager pass nnx.capture runs
def test_every_kind_s_inputs_are_captured_through_a_model():
    """``nnx.capture`` of ``AttentionInputs`` through a hybrid stack: nnx sets ``__captures__`` on every module, the
    ``nnx.Dict`` of a layer's random parameters too, which a layer that iterated that dict read as a parameter."""
    sites = (Site("gated_deltanet", chunk_size=4), Site("positive", num_features=8))
    model = Decoder(preset("tiny", vocab_size=VOCAB, decoder_attention=sites, max_length=16), rngs=nnx.Rngs(0))
    sequence = tokens(0, (1, 6))
    logits, sown = nnx.capture(lambda model, tokens: model(tokens), AttentionInputs)(model, sequence)
    q, k, v, key_mask = sown["stack"]["layers"][1]["self_attention"]["inputs"][0]
    assert q.shape == k.shape == v.shape and key_mask.shape == (1, 6)
    np.testing.assert_allclose(logits, forward(model, sequence), atol=1e-5)


PACKED = {
    "hybrid": (Site("gated_deltanet", chunk_size=4), Site()),
    "softmax": Site(),
    "gated_rfa": Site("rfa", num_features=8, gated=True),
    "kda": Site("kda", chunk_size=4),
    "sliding_window": Site("sliding_window", window=3),
}


@pytest.mark.parametrize("kind", [k if k == "hybrid" else pytest.param(k, marks=pytest.mark.slow) for k in PACKED])
def test_a_packed_row_is_each_sequence_alone(kind):
    """Three sequences in one row (``segment_ids``), then padding: each token's logits are those of its sequence
    alone, absolute positions (sinusoidal) restarting with each sequence, states and convolutions too."""
    model = Decoder(preset("tiny", vocab_size=VOCAB, decoder_attention=PACKED[kind], max_length=16), rngs=nnx.Rngs(0))
    packed, alone = packed_and_alone(model, (5, 3, 4), VOCAB)
    np.testing.assert_allclose(packed, alone, atol=2e-5 * float(jnp.max(jnp.abs(alone))))


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_cls_pooling_and_bfloat16_classifier(kind):
    classifier = Encoder(config(kind, pooling="cls", dtype="bfloat16"), rngs=nnx.Rngs(0))
    source = tokens(17, (2, 6))
    padded = jnp.concatenate([source, jnp.zeros((2, 3), source.dtype)], axis=1)
    logits = forward(classifier, padded)
    assert logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logits)))
    np.testing.assert_allclose(logits, forward(classifier, source), rtol=0.05, atol=0.05)  # bfloat16 rounding


# Max abs errors of decoding against teacher forcing measured below, about one rounding of logits up to
# 5.4 in the dtype: bfloat16 0.0078 and 0.0069 (exact), 0.0137 and 0.0077 (positive); float16 0.0020 and
# 0.0029 (exact), 0 and 0 (positive: its float32 internals agree to below a float16 rounding).
# The tolerance is 2x the largest.
LOW_PRECISION_TOLERANCE = {"bfloat16": 0.028, "float16": 0.006}


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "dtype"), [("softmax", "float16"), ("positive", "bfloat16")])
def test_low_precision_decoding_equals_teacher_forcing(kind, dtype):
    tolerance = LOW_PRECISION_TOLERANCE[dtype]
    one_layer = {"num_encoder_layers": 1, "num_decoder_layers": 1}  # stacking is tested in float32
    lm = Decoder(config(kind, dtype=dtype, **one_layer), rngs=nnx.Rngs(0))
    prompt = tokens(31, (2, 4)).at[1, 0].set(0)
    generated, logits = decoding.generate(lm, prompt, max_new_tokens=5)
    full = forward(lm, jnp.concatenate([prompt, generated], axis=1))
    np.testing.assert_allclose(logits, full[:, 3:-1], rtol=0, atol=tolerance)
    # The same parameters computing in float32 (max abs difference measured: bfloat16 0.024, float16 0.003).
    reference = forward(Decoder(config(kind, **one_layer), rngs=nnx.Rngs(0)), jnp.concatenate([prompt, generated], 1))
    np.testing.assert_allclose(full, reference, rtol=0, atol={"bfloat16": 0.05, "float16": 0.006}[dtype])
    translation = EncoderDecoder(config(kind, dtype=dtype, **one_layer), rngs=nnx.Rngs(0))
    source = tokens(32, (2, 7)).at[1, 5:].set(0)
    generated, logits = decoding.generate(translation, source, max_new_tokens=5)
    target_in = jnp.concatenate([jnp.ones((2, 1), generated.dtype), generated[:, :-1]], axis=1)
    np.testing.assert_allclose(logits, forward(translation, source, target_in), rtol=0, atol=tolerance)
    if kind == "softmax":  # exact caches are kept in the model's dtype (kernelized states are float32)
        _, cache = nnx.eval_shape(lambda m: m.prefill(prompt, 9), lm)
        memories = nnx.eval_shape(lambda m: m.prepare_memory(*m.encode(source)), translation)
        for keys_values in (cache[0]["self"], memories[0]):
            assert keys_values["k"].dtype == keys_values["v"].dtype == jnp.dtype(dtype)


def test_mismatched_batches_are_rejected():
    model = EncoderDecoder(config(), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="same batch size"):
        model(tokens(18, (2, 5)), tokens(19, (3, 4)))


@pytest.mark.slow
def test_models_train_under_jit_with_nnx_optimizer():
    import optax

    model = EncoderDecoder(config("positive", dropout_rate=0.1), rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    source, target = tokens(15, (4, 8)), tokens(16, (4, 8))

    @nnx.jit
    def train_step(model, optimizer, source, target):
        def loss_fn(model):
            logits = model(source, target[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, target[:, 1:]).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    projection = jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))[0].copy()
    losses = [float(train_step(model, optimizer, source, target)) for _ in range(20)]
    assert losses[-1] < 0.7 * losses[0]
    np.testing.assert_array_equal(jax.tree.leaves(nnx.state(model, rfa.layers.RandomProjection))[0], projection)


def test_the_0_2_attention_config_is_the_site_of_each_kind_with_a_warning():
    """``AttentionConfig``'s one 15-field form still builds the same site, for one release: ``num_features`` is each
    kind's size, ``delta_rule`` the delta rule's options, ``projection`` projection_kind's 0.2 name."""
    from rfa.models import AttentionConfig, DeltaRuleOptions

    old_and_new = [
        (
            lambda: AttentionConfig("positive", 32, projection="iid"),
            Site("positive", num_features=32, projection_kind="iid"),
        ),
        (lambda: AttentionConfig("softmax", 64, num_kv_heads=2), Site(num_kv_heads=2)),
        (lambda: AttentionConfig("sliding_window", 16), Site("sliding_window", window=16)),
        (lambda: AttentionConfig("linformer", 8), Site("linformer", projected_length=8)),
        (lambda: AttentionConfig("fourier", feature_params=(("radius", 2.0),)), Site("fourier", radius=2.0)),
        (lambda: AttentionConfig("rfa", 16, gated=True), Site("gated_rfa", num_features=16)),
        (
            lambda: AttentionConfig("gated_deltanet", chunk_size=8, delta_rule=DeltaRuleOptions(head_dim=16)),
            Site("gated_deltanet", chunk_size=8, head_dim=16, num_features=256),
        ),
    ]
    for old, new in old_and_new:
        with pytest.warns(
            DeprecationWarning, match=r"AttentionConfig\(kind, num_features, \.\.\.\) is rfa.models.Site"
        ):
            assert old() == new
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(rfa.InputError, match=r"kind 'softmax' has no option \['gated'\]"),
    ):
        AttentionConfig("softmax", gated=True)
