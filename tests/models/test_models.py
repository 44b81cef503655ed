"""NNX Transformers: decoding with caches equals teacher forcing, causality, padding, kernels vs exact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import rfa
from rfa.models import AttentionConfig, Decoder, Encoder, EncoderDecoder, decoding, preset, redraw_projections

VOCAB = 23
KINDS = {
    "softmax": AttentionConfig(),
    "positive": AttentionConfig("positive", 32),
    "trig": AttentionConfig("trig", 32, projection="iid"),
    "hyperbolic": AttentionConfig("hyperbolic", 16),
    "oprf": AttentionConfig("oprf", 32, feature_params=(("phi_sq", 1.0),)),
    "relu": AttentionConfig("relu", 32),
    "elu": AttentionConfig("elu"),
}


def config(kind="softmax", positional="sinusoidal", **overrides):
    attention = KINDS[kind]
    return preset("tiny", vocab_size=VOCAB, positional=positional, encoder_attention=attention,
                  decoder_attention=attention, cross_attention=attention, **overrides)  # fmt: skip


@nnx.jit
def forward(model, *inputs):
    """The model's forward pass, compiled as one program (eager op-by-op dispatch is far slower)."""
    return model(*inputs)


def tokens(key, shape, low=1):
    return jax.random.randint(jax.random.key(key), shape, low, VOCAB)


def step_by_step(model, target, memories=None):
    cache = model.init_cache(target.shape[0], target.shape[1])
    step = nnx.jit(lambda m, t, c, p, mem: m.decode_step(t, c, p) if mem is None else m.decode_step(t, c, p, mem))
    logits = []
    for t in range(target.shape[1]):
        out, cache = step(model, target[:, t], cache, jnp.asarray(t), memories)
        logits.append(out)
    return jnp.stack(logits, 1)


@pytest.mark.parametrize("kind", list(KINDS))
def test_decoder_step_by_step_equals_teacher_forcing(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(1, (2, 9))
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("positional", ["learned", "rotary", "relative"])
def test_decoding_equals_teacher_forcing_for_every_positional_encoding(positional):
    kinds = ["softmax"] if positional == "relative" else ["softmax", "positive"]
    for kind in kinds:
        model = Decoder(config(kind, positional), rngs=nnx.Rngs(0))
        sequence = tokens(2, (2, 7))
        np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", list(KINDS))
def test_encoder_decoder_decoding_with_prepared_memory_equals_teacher_forcing(kind):
    model = EncoderDecoder(config(kind, "rotary"), rngs=nnx.Rngs(0))
    source = tokens(3, (2, 11)).at[1, 8:].set(0)  # the second source is padded
    target = tokens(4, (2, 6))
    memory, mask = model.encode(source)
    stepped = step_by_step(model, target, model.prepare_memory(memory, mask))
    tolerance = 1e-3 if kind == "trig" else 1e-4  # trig's signed normalizer can be small: it amplifies rounding
    np.testing.assert_allclose(stepped, forward(model, source, target), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_future_tokens_never_change_earlier_outputs(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(5, (1, 10))
    changed = sequence.at[:, 6:].set(tokens(6, (1, 4)))
    np.testing.assert_allclose(forward(model, changed)[:, :6], forward(model, sequence)[:, :6], rtol=1e-5, atol=1e-5)
    assert not np.allclose(forward(model, changed)[:, 6:], forward(model, sequence)[:, 6:])


@pytest.mark.parametrize("kind", ["softmax", "positive", "oprf"])
def test_padded_sources_give_the_outputs_of_unpadded_ones(kind):
    source, target = tokens(7, (1, 6)), tokens(8, (1, 5))
    padded = jnp.concatenate([source, jnp.zeros((1, 4), source.dtype)], axis=1)
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    unpadded = forward(translation, source, target)
    np.testing.assert_allclose(forward(translation, padded, target), unpadded, rtol=1e-4, atol=1e-4)
    classifier = Encoder(config(kind), rngs=nnx.Rngs(0))
    np.testing.assert_allclose(forward(classifier, padded), forward(classifier, source), rtol=1e-4, atol=1e-4)


def test_kernelized_model_approaches_the_exact_one_as_m_grows():
    exact = Encoder(config("softmax", num_classes=5), rngs=nnx.Rngs(0))
    sequence = tokens(9, (4, 16))
    reference = forward(exact, sequence)
    errors = []
    for m in (4, 32, 512):
        attention = AttentionConfig("positive", m)
        model = Encoder(preset("tiny", vocab_size=VOCAB, num_classes=5, encoder_attention=attention),
                        rngs=nnx.Rngs(0))  # fmt: skip
        nnx.update(model, nnx.state(exact, nnx.Param))
        draws = []
        for seed in range(4):
            redraw_projections(model, jax.random.key(seed))
            draws.append(float(jnp.mean((forward(model, sequence) - reference) ** 2)))
        errors.append(np.mean(draws))
    assert errors[0] > errors[1] > errors[2], errors


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_a_padding_token_without_visible_keys_attends_to_nothing(kind):
    model = Decoder(config(kind), rngs=nnx.Rngs(0))
    sequence = tokens(20, (1, 6)).at[:, 0].set(0)  # position 0 is padding: it sees no key at all
    changed = sequence.at[:, 1:].set(tokens(21, (1, 5)))
    np.testing.assert_allclose(forward(model, changed)[:, 0], forward(model, sequence)[:, 0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=1e-4, atol=1e-4)


def test_redraw_policy_redraws_the_sites_that_are_due():
    every_2 = AttentionConfig("positive", 16, redraw_every=2)
    sites = {"encoder_attention": KINDS["positive"], "decoder_attention": every_2, "cross_attention": KINDS["softmax"]}
    model = EncoderDecoder(preset("tiny", vocab_size=VOCAB, **sites), rngs=nnx.Rngs(0))
    assert redraw_projections(model, jax.random.key(0), step=3) == 0
    assert redraw_projections(model, jax.random.key(0), step=4) == 2  # the two decoder self-attentions
    assert redraw_projections(model, jax.random.key(0)) == 4  # every kernelized site


def test_redraw_changes_the_projection_and_evaluation_is_deterministic():
    model = Decoder(config("positive", dropout_rate=0.3), rngs=nnx.Rngs(0))
    model.eval()
    sequence = tokens(10, (2, 8))
    first = forward(model, sequence)
    np.testing.assert_array_equal(forward(model, sequence), first)
    before = [np.array(w) for w in jax.tree.leaves(nnx.state(model, rfa.attention.RandomProjection))]
    redraw_projections(model, jax.random.key(1))
    assert not np.allclose(forward(model, sequence), first)
    params_unchanged = nnx.state(Decoder(config("positive", dropout_rate=0.3), rngs=nnx.Rngs(0)), nnx.Param)
    jax.tree.map(np.testing.assert_array_equal, nnx.state(model, nnx.Param), params_unchanged)
    after = jax.tree.leaves(nnx.state(model, rfa.attention.RandomProjection))
    assert len(before) == 2 and all(not np.allclose(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_greedy_generation_picks_the_argmax_of_the_teacher_forced_logits(kind):
    lm = Decoder(config(kind), rngs=nnx.Rngs(0))
    prompt = tokens(11, (2, 4))
    generated, logits = decoding.generate(lm, prompt, max_new_tokens=5)
    full = forward(lm, jnp.concatenate([prompt, generated], axis=1))
    np.testing.assert_allclose(logits, full[:, 3:-1], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(generated, jnp.argmax(full[:, 3:-1], -1))
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    source = tokens(12, (2, 7))
    generated, logits = decoding.generate(translation, source, max_new_tokens=5, bos_id=1)
    target_in = jnp.concatenate([jnp.ones((2, 1), generated.dtype), generated[:, :-1]], axis=1)
    np.testing.assert_allclose(logits, forward(translation, source, target_in), rtol=1e-4, atol=1e-4)


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


def test_beam_search_keeps_finished_beams_at_eos():
    translation = EncoderDecoder(config("softmax"), rngs=nnx.Rngs(0))
    source = tokens(23, (2, 5))
    beams, scores = decoding.beam_search(translation, source, beam_size=4, max_new_tokens=6, eos_id=2,
                                         length_penalty=0.6)  # fmt: skip
    for beam in np.asarray(beams).reshape(-1, 6):
        ends = np.flatnonzero(beam == 2)
        if ends.size:
            assert np.all(beam[ends[0] :] == 2), beam
    assert bool(jnp.all(scores[:, :-1] >= scores[:, 1:]))


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
    with pytest.raises(TypeError, match="needs a Decoder or an EncoderDecoder"):
        decoding.generate(Encoder(config(), rngs=nnx.Rngs(0)), source, max_new_tokens=2)


def test_sampling_is_reproducible_and_top_1_is_greedy():
    lm = Decoder(config("positive"), rngs=nnx.Rngs(0))
    prompt = tokens(13, (3, 2))
    greedy, _ = decoding.generate(lm, prompt, max_new_tokens=6)
    top1, _ = decoding.generate(lm, prompt, max_new_tokens=6, temperature=0.7, top_k=1, key=jax.random.key(0))
    np.testing.assert_array_equal(top1, greedy)
    a, _ = decoding.generate(lm, prompt, max_new_tokens=6, temperature=1.5, key=jax.random.key(1))
    b, _ = decoding.generate(lm, prompt, max_new_tokens=6, temperature=1.5, key=jax.random.key(1))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        decoding.generate(lm, prompt, max_new_tokens=2, temperature=1.0)


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_beam_search_finds_at_least_the_greedy_score(kind):
    translation = EncoderDecoder(config(kind), rngs=nnx.Rngs(0))
    source = tokens(14, (2, 6))
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
        ({"positional": "relative", "decoder_attention": KINDS["positive"]}, ValueError, "'relative' adds a bias"),
        ({"decoder_attention": AttentionConfig("oprf", 16)}, ValueError, r"needs feature_params \['phi_sq'\]"),
        ({"positional": "alibi"}, ValueError, "positional must be one of"),
        ({"norm": "sandwich"}, ValueError, "norm must be one of"),
        ({"cross_attention": "positive"}, TypeError, "cross_attention must be an AttentionConfig"),
        (
            {"positional": "relative", "relative_buckets": 32, "relative_max_distance": 8},
            ValueError,
            "relative_max_distance >= relative_buckets",
        ),
        ({"pad_id": 23}, ValueError, r"pad_id must be a token of the vocabulary \[0, 23\)"),
    ],
)
def test_inconsistent_configs_are_rejected(overrides, error, message):
    with pytest.raises(error, match=message):
        preset("tiny", vocab_size=VOCAB, **overrides)


def test_unknown_attention_kinds_and_presets_are_rejected():
    with pytest.raises(ValueError, match="attention kind must be 'softmax' or a registered feature map"):
        AttentionConfig("cosine")
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


@pytest.mark.parametrize("kind", ["softmax", "positive"])
def test_cls_pooling_and_bfloat16_models(kind):
    classifier = Encoder(config(kind, pooling="cls", dtype="bfloat16"), rngs=nnx.Rngs(0))
    source = tokens(17, (2, 6))
    padded = jnp.concatenate([source, jnp.zeros((2, 3), source.dtype)], axis=1)
    logits = forward(classifier, padded)
    assert logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logits)))
    np.testing.assert_allclose(logits, forward(classifier, source), rtol=0.05, atol=0.05)  # bfloat16 rounding
    lm = Decoder(config(kind, dtype="bfloat16"), rngs=nnx.Rngs(0))
    assert bool(jnp.all(jnp.isfinite(forward(lm, source))))


def test_mismatched_batches_are_rejected():
    model = EncoderDecoder(config(), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="same batch size"):
        model(tokens(18, (2, 5)), tokens(19, (3, 4)))


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

    projection = jax.tree.leaves(nnx.state(model, rfa.attention.RandomProjection))[0].copy()
    losses = [float(train_step(model, optimizer, source, target)) for _ in range(20)]
    assert losses[-1] < 0.7 * losses[0]
    np.testing.assert_array_equal(jax.tree.leaves(nnx.state(model, rfa.attention.RandomProjection))[0], projection)
