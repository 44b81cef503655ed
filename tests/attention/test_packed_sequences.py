"""Packed sequences (``segment_ids``): a row that packs several sequences equals each sequence run alone, in values
and gradients, for every causal kind, through the chunked forms with boundaries inside chunks (chunk 4, sequences
of 5, 7 and 2 tokens), in the primitives and in the layers, with padding between and after the sequences."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from flax import nnx

import rfa
from rfa.attention import delta_rule_attention, sliding_window_attention, softmax_attention
from rfa.attention.segments import sequence_starts
from rfa.layers.short_convolution import causal_convolution

LENGTHS = (5, 7, 2)  # the last shorter than the convolution's history (3)
HEADS, D = 2, 8


def packed_ids():
    return jnp.concatenate([jnp.full((n,), i + 1) for i, n in enumerate(LENGTHS)])[None]


def each_alone(f, *args):
    """``f`` on each sequence's tokens (axis 1) alone, concatenated back along the row."""
    bounds = np.cumsum((0,) + LENGTHS)
    return jnp.concatenate([f(*(a[:, s:e] for a in args)) for s, e in itertools.pairwise(bounds)], axis=1)


@jax.jit(static_argnums=0)
def outputs_and_gradients(f, *args):
    """``f(*args)`` and the gradients of ``Σ sin(f(*args))`` with respect to every argument, in one program."""
    out, vjp = jax.vjp(f, *args)
    return out, vjp(jnp.cos(out))


def assert_packed_equals_alone(packed, alone, args, atol=2e-6):
    got = outputs_and_gradients(packed, *args)
    expected = outputs_and_gradients(lambda *x: each_alone(alone, *x), *args)
    jax.tree.map(lambda g, e: np.testing.assert_allclose(g, e, atol=atol), got, expected)


def inputs():
    keys = jax.random.split(jax.random.key(0), 6)
    shape = (1, sum(LENGTHS), HEADS, D)
    q, k, v = (jax.random.normal(key, shape) for key in keys[:3])
    beta = jax.nn.sigmoid(jax.random.normal(keys[3], shape[:-1]))
    per_token = -jax.nn.softplus(jax.random.normal(keys[4], shape[:-1]))
    per_channel = -jax.nn.softplus(3 * jax.random.normal(keys[5], shape))
    return q, k, v, beta, per_token, per_channel


def unit(x):
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


W = rfa.sample_projection(jax.random.key(1), 16, D)
CASES = {
    "kernelized": ("positive", W, None),
    "kernelized, a decay per token": ("positive", W, "token"),
    "kernelized, a decay per feature (GLA)": ("elu", None, "channel"),
}
SLOW = pytest.mark.slow  # one representative per axis in the fast tier


@pytest.mark.parametrize("case", [pytest.param(c, marks=SLOW) if "GLA" not in c else c for c in CASES])
def test_packed_kernelized_attention_is_each_sequence_alone(case):
    estimator, projection, decay = CASES[case]
    q, k, v, _, per_token, per_channel = inputs()

    def attend(segment_ids):
        def f(q, k, v, *g):
            return rfa.kernelized_attention(
                q, k, v, estimator=estimator, projection=projection, is_causal=True, chunk_size=4,
                log_decay=g[0] if g else None, segment_ids=segment_ids,
            )  # fmt: skip

        return f

    args = (q, k, v) + (() if decay is None else (per_token if decay == "token" else per_channel,))
    assert_packed_equals_alone(attend(packed_ids()), attend(None), args)


@pytest.mark.parametrize(
    "decay",
    [pytest.param(None, marks=SLOW), pytest.param("token", marks=SLOW), "channel"],
    ids=["DeltaNet", "Gated DeltaNet", "KDA"],
)
def test_packed_delta_rule_is_each_sequence_alone(decay):
    q, k, v, beta, per_token, per_channel = inputs()

    def attend(segment_ids):
        def f(q, k, v, beta, *g):
            g = g[0] if g else None
            return delta_rule_attention(unit(q), unit(k), v, beta, log_decay=g, chunk_size=4, segment_ids=segment_ids)

        return f

    args = (q, k, v, beta) + (() if decay is None else (per_token if decay == "token" else per_channel,))
    assert_packed_equals_alone(attend(packed_ids()), attend(None), args)


def test_packed_exact_and_window_attention_are_each_sequence_alone():
    q, k, v, *_ = inputs()
    for attend in (
        lambda q, k, v, ids=None: softmax_attention(q, k, v, is_causal=True, segment_ids=ids),
        lambda q, k, v, ids=None: sliding_window_attention(q, k, v, window=3, segment_ids=ids),
    ):
        assert_packed_equals_alone(lambda *a, f=attend: f(*a, ids=packed_ids()), attend, (q, k, v))


def test_packed_short_convolution_reads_its_own_sequence_and_leaves_the_last_ones_history():
    x = jax.random.normal(jax.random.key(2), (1, sum(LENGTHS), 6))
    weight = jax.random.normal(jax.random.key(3), (4, 6))
    keep = jnp.ones(x.shape[:2], bool)

    def convolve(x, ids=None):
        return causal_convolution(x, weight, jnp.zeros((1, 3, 6)), keep[:, : x.shape[1]], ids)

    assert_packed_equals_alone(lambda x: convolve(x, packed_ids())[0], lambda x: convolve(x)[0], (x,))
    _, history = convolve(x, packed_ids())
    np.testing.assert_array_equal(history, convolve(x[:, -LENGTHS[-1] :])[1])  # the last sequence's inputs alone


def test_a_sequence_starts_at_a_kept_token_whose_id_differs_from_the_last_kept_one():
    ids = jnp.array([[7, 7, 1, 1, 0, 1, 2, 0, 0]])
    keep = jnp.array([[False, True, True, True, False, True, True, False, False]])
    # leading padding of another id does not start the first sequence; padding between two tokens of sequence 1
    # splits nothing; trailing padding starts nothing
    assert sequence_starts(ids, keep).astype(int).tolist() == [[0, 0, 1, 0, 0, 0, 1, 0, 0]]


def test_packed_calls_refuse_what_they_cannot_do():
    q, k, v, *_ = inputs()
    with pytest.raises(rfa.InputError, match="is_causal=True"):
        rfa.kernelized_attention(q, k, v, estimator="elu", projection=None, segment_ids=packed_ids())
    with pytest.raises(TypeError, match="integers"):
        softmax_attention(q, k, v, segment_ids=packed_ids().astype(jnp.float32))
    with pytest.raises(rfa.InputError, match="segment_ids"):
        softmax_attention(q, k[:, :4], v[:, :4], segment_ids=packed_ids())


# Layers: sequence 2 holds a padded token, and two padded tokens (of id 0) end the row.
GAP = 2  # the padded position inside sequence 2


def layer_batch():
    x = jax.random.normal(jax.random.key(4), (1, sum(LENGTHS) + 2, 16))
    keep = np.ones(x.shape[:2], bool)
    keep[0, LENGTHS[0] + GAP] = keep[0, -2:] = False
    ids = np.concatenate([np.asarray(packed_ids()), np.zeros((1, 2), np.int32)], axis=1)
    return x, jnp.asarray(keep), jnp.asarray(ids)


LAYERS = {
    "DeltaNet": lambda rngs: rfa.nnx.DeltaNet(2, 16, chunk_size=4, rngs=rngs),
    "GatedDeltaNet": lambda rngs: rfa.nnx.GatedDeltaNet(2, 16, chunk_size=4, rngs=rngs),
    "KimiDeltaAttention": lambda rngs: rfa.nnx.KimiDeltaAttention(2, 16, chunk_size=4, rngs=rngs),
    "GatedLinearAttention": lambda rngs: rfa.nnx.GatedLinearAttention(2, 16, chunk_size=4, rngs=rngs),
    "SlidingWindowAttention": lambda rngs: rfa.nnx.SlidingWindowAttention(2, 16, window=3, rngs=rngs),
}


@pytest.mark.parametrize("name", [n if n == "GatedDeltaNet" else pytest.param(n, marks=SLOW) for n in LAYERS])
def test_packed_layer_is_each_sequence_alone_in_outputs_and_weight_gradients(name):
    layer = LAYERS[name](nnx.Rngs(0))
    x, keep, ids = layer_batch()
    spans = list(itertools.pairwise(np.cumsum((0,) + LENGTHS)))

    def packed(layer):
        return layer(x, mask=nnx.make_attention_mask(keep, keep), segment_ids=ids)

    def alone(layer):  # each sequence in its own call, with its own padding; the row's trailing padding outputs 0
        outs = [layer(x[:, s:e], mask=nnx.make_attention_mask(keep[:, s:e], keep[:, s:e])) for s, e in spans]
        return jnp.concatenate(outs + [jnp.zeros_like(x[:, -2:])], axis=1)

    def outputs_and_gradients(run):
        def loss(layer):
            out = run(layer)
            return jnp.sum(jnp.sin(out)), out

        return nnx.jit(nnx.value_and_grad(loss, has_aux=True))(layer)

    got, expected = outputs_and_gradients(packed), outputs_and_gradients(alone)
    jax.tree.map(lambda g, e: np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6), got, expected)


def test_a_packed_prefill_leaves_the_last_sequences_state_and_convolution_history():
    layer = LAYERS["GatedDeltaNet"](nnx.Rngs(0))
    x, keep, ids = layer_batch()
    step = nnx.jit(lambda layer, x, keep, ids=None: layer.step(x, layer.empty_state(1), mask=keep, segment_ids=ids))
    _, cache = step(layer, x, nnx.make_attention_mask(keep, keep), ids)
    last = slice(sum(LENGTHS[:-1]), None)  # the last sequence and the trailing padding
    _, alone = step(layer, x[:, last], nnx.make_attention_mask(keep[:, last], keep[:, last]))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6), cache, alone)


def test_the_linen_layer_packs_sequences_as_the_nnx_layer():
    x, keep, ids = layer_batch()
    layer = rfa.linen.GatedDeltaNet(num_heads=2, chunk_size=4)
    mask = nn.make_attention_mask(keep, keep)
    variables = layer.init(jax.random.key(0), x, mask=mask)
    packed = layer.apply(variables, x, mask=mask, segment_ids=ids)
    first = slice(0, LENGTHS[0])
    alone = layer.apply(variables, x[:, first])
    np.testing.assert_allclose(packed[:, first], alone, atol=2e-6)
    assert not np.allclose(packed[:, LENGTHS[0] : LENGTHS[0] + 2], layer.apply(variables, x, mask=mask)[:, 5:7])
