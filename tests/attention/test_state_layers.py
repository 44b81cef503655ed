"""``rfa.nnx.DeltaNet``, ``GatedDeltaNet``, ``KimiDeltaAttention``, ``GatedLinearAttention`` and
``SlidingWindowAttention`` (and their Linen twins): Flax layers whose decode cache is a state of fixed size.

Decoding (token by token, or several tokens per call) equals the full pass; Flax's causal and padding masks are
applied (a padded sequence equals the sequence alone, a padded query outputs 0) and other masks refused, eagerly
and under ``nnx.jit``; a layer with a random projection is redrawn by ``rfa.nnx.redraw``. The delta-rule site
itself is held to the papers' layer in tests/models/test_delta_window_hybrid.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered

import rfa

LAYERS = {
    "deltanet": lambda: rfa.nnx.DeltaNet(4, 32, chunk_size=4, rngs=nnx.Rngs(0)),
    "gated_deltanet": lambda: rfa.nnx.GatedDeltaNet(4, 32, chunk_size=4, rngs=nnx.Rngs(0)),
    "gla": lambda: rfa.nnx.GatedLinearAttention(4, 32, chunk_size=4, rngs=nnx.Rngs(0)),
    "kda": lambda: rfa.nnx.KimiDeltaAttention(4, 32, chunk_size=4, rngs=nnx.Rngs(0)),
    "window": lambda: rfa.nnx.SlidingWindowAttention(4, 32, window=3, rngs=nnx.Rngs(0)),
}
X = jax.random.normal(jax.random.key(1), (2, 11, 32))


@nnx.jit(static_argnames="decode")
def call(layer, x, mask=None, decode=False):
    return layer(x, mask=mask, decode=decode)


@pytest.mark.parametrize("name", list(LAYERS))
def test_decoding_one_or_several_tokens_per_call_equals_the_full_pass(name):
    layer = LAYERS[name]()
    full = call(layer, X)
    layer.init_cache(X.shape)
    pieces = [call(layer, X[:, :5], decode=True)] + [call(layer, X[:, t : t + 1], decode=True) for t in range(5, 11)]
    np.testing.assert_allclose(jnp.concatenate(pieces, axis=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", tiered(list(LAYERS), {"deltanet", "gated_deltanet", "gla"}))
def test_flax_masks_pad_the_sequence(name):
    """Padding first (positions 0-2) and between tokens (position 6): the kept tokens' outputs are those of the
    sequence without the padding, and a padded query outputs 0 (as fla's layers, which leave padding out); Flax's
    padding mask alone (``make_attention_mask``) is the same padding of a causal layer. Which masks are applied and
    which refused, for every layer: ``test_flax_masks.py``."""
    layer = LAYERS[name]()
    kept = np.array([3, 4, 5, 7, 8, 9, 10])
    valid = jnp.isin(jnp.arange(11), kept)[None]
    padded = jnp.broadcast_to(jnp.where(valid[..., None], X, 7.0), (2, 11, 32))
    causal = nnx.make_causal_mask(jnp.ones((2, 11)))
    out = call(layer, padded, nnx.combine_masks(causal, nnx.make_attention_mask(valid, valid)))
    np.testing.assert_allclose(out[:, kept], call(layer, X[:, kept]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:, ~valid[0]], 0.0)
    np.testing.assert_array_equal(call(layer, padded, nnx.make_attention_mask(valid, valid)), out)


@pytest.mark.parametrize("name", tiered(list(LAYERS), {"gated_deltanet"}))
def test_right_padded_prompts_then_decoding_equal_each_prompt_alone(name):
    """Prompts of 5 and 8 tokens right-padded to 8, then a token that is padding in the row that has ended, then two
    tokens: every row's outputs are its prompt's alone (its state and convolution history hold no padding), and the
    padding token leaves the row's whole cache as it was."""
    layer, lengths = LAYERS[name](), (5, 8)
    valid = jnp.arange(8)[None] < jnp.array(lengths)[:, None]
    layer.init_cache(X.shape)
    call(layer, jnp.where(valid[..., None], X[:, :8], 7.0), nnx.make_attention_mask(valid, valid), decode=True)
    before = layer.cached_state.get_value()
    ended = jnp.array([[False], [True]])
    call(layer, X[:, 8:9], nnx.make_attention_mask(ended, ended), decode=True)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[0], b[0]), layer.cached_state.get_value(), before)
    out = jnp.concatenate([call(layer, X[:, t : t + 1], decode=True) for t in (9, 10)], axis=1)
    for row, n in enumerate(lengths):
        alone = LAYERS[name]()
        alone.init_cache((1, 11, 32))
        prompt = jnp.concatenate([X[row : row + 1, :n], X[row : row + 1, 8:9]], axis=1)[:, : n + row]
        call(alone, prompt, decode=True)  # row 1's prompt is its 8 tokens and the 9th, which row 0 skipped
        expected = jnp.concatenate([call(alone, X[row : row + 1, t : t + 1], decode=True) for t in (9, 10)], axis=1)
        np.testing.assert_allclose(out[row : row + 1], expected, rtol=1e-5, atol=1e-5)


def test_a_gated_layer_with_a_random_projection_is_redrawn():
    layer = rfa.nnx.GatedLinearAttention(4, 32, estimator="positive", num_features=16, rngs=nnx.Rngs(0))
    before = call(layer, X)
    assert rfa.nnx.redraw(layer, jax.random.key(5)) == 1
    assert float(jnp.max(jnp.abs(call(layer, X) - before))) > 1e-4


def test_a_linen_layer_with_a_random_projection_refuses_variables_without_it():
    """Without the ``random_features`` collection the layer would draw another W and answer differently."""
    layer = rfa.linen.GatedLinearAttention(num_heads=4, estimator="positive", num_features=16)
    variables = layer.init(jax.random.key(1), X)
    with pytest.raises(rfa.InputError, match="the variables hold no random_features"):
        layer.apply({"params": variables["params"]}, X)
    elu = rfa.linen.GatedLinearAttention(num_heads=4)  # draws nothing: params alone are every variable
    assert list(elu.init(jax.random.key(1), X)) == ["params"]


@pytest.mark.parametrize("name", tiered(["gated_deltanet", "gla", "kda"], {"gated_deltanet", "gla"}))
def test_the_linen_layers_decode_from_the_cache_collection_as_the_full_pass(name):
    """``rfa.linen``: ``init`` with ``decode=True`` creates the empty state; each ``apply(mutable=["cache"])``
    continues it (a prompt, then one token per call) and equals the full pass; padding masks apply as in NNX."""
    layers = {"gated_deltanet": rfa.linen.GatedDeltaNet, "gla": rfa.linen.GatedLinearAttention}
    layer = (layers | {"kda": rfa.linen.KimiDeltaAttention})[name]
    params = layer(num_heads=4, chunk_size=4).init(jax.random.key(0), X)["params"]
    full = layer(num_heads=4, chunk_size=4).apply({"params": params}, X)
    decoder = layer(num_heads=4, chunk_size=4, decode=True)
    variables = {"params": params, "cache": decoder.init(jax.random.key(0), X[:, :1])["cache"]}
    step = jax.jit(lambda variables, x: decoder.apply(variables, x, mutable=["cache"]))
    pieces = []
    for start, stop in [(0, 5)] + [(t, t + 1) for t in range(5, 11)]:
        out, updated = step(variables, X[:, start:stop])
        variables = {**variables, **updated}
        pieces.append(out)
    np.testing.assert_allclose(jnp.concatenate(pieces, axis=1), full, rtol=1e-5, atol=1e-5)
    valid = jnp.arange(11)[None] >= 3
    padded = layer(num_heads=4, chunk_size=4).apply({"params": params}, X, mask=nnx.make_attention_mask(valid, valid))
    alone = layer(num_heads=4, chunk_size=4).apply({"params": params}, X[:, 3:])
    np.testing.assert_allclose(padded[:, 3:], alone, rtol=1e-5, atol=1e-5)


def test_the_sliding_window_layer_is_flax_attention_with_a_band_mask():
    """``rfa.nnx.SlidingWindowAttention`` with ``nnx.MultiHeadAttention``'s weights is that layer under the mask of
    the window (causal, the last 3 tokens), over a batch with padding between tokens: the window counts kept tokens,
    so the reference is Flax's layer on each row's kept tokens alone."""
    layer = LAYERS["window"]()
    flax_layer = nnx.MultiHeadAttention(4, 32, decode=False, rngs=nnx.Rngs(1))
    nnx.update(flax_layer, nnx.state(layer, nnx.Param))
    band = jnp.tril(jnp.triu(jnp.ones((11, 11), bool), -2))
    np.testing.assert_allclose(call(layer, X), flax_layer(X, mask=band), rtol=1e-5, atol=1e-5)
    valid = jnp.isin(jnp.arange(11), jnp.array([0, 1, 4, 5, 6, 9, 10]))[None]
    out = call(layer, X, nnx.make_attention_mask(valid, valid))
    kept = X[:, valid[0]]
    np.testing.assert_allclose(out[:, valid[0]], flax_layer(kept, mask=band[:7, :7]), rtol=1e-5, atol=1e-5)


def test_deltanet_gated_true_is_the_gated_layer_with_a_warning_for_one_release():
    """Before 0.6 ``rfa.nnx.DeltaNet`` was Gated DeltaNet by default; ``gated=True`` still builds that layer (the
    same weights and outputs as ``rfa.nnx.GatedDeltaNet``), with a DeprecationWarning."""
    with pytest.warns(DeprecationWarning, match="rfa.nnx.GatedDeltaNet"):
        old = rfa.nnx.DeltaNet(4, 32, gated=True, chunk_size=4, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(call(old, X), call(LAYERS["gated_deltanet"](), X))
    assert not hasattr(LAYERS["deltanet"](), "A_log")  # DeltaNet itself has no decay


def test_a_short_prompt_enters_the_cache_by_the_recurrent_form_with_the_chunked_result():
    """``recurrent_below`` (64) prefills 11 tokens token by token; 0 runs them in chunks of 4: the same outputs and
    the same state."""
    recurrent, chunked = (
        rfa.nnx.KimiDeltaAttention(4, 32, chunk_size=4, recurrent_below=below, rngs=nnx.Rngs(0)) for below in (64, 0)
    )
    step = nnx.jit(lambda layer, x, state: layer.step(x, state))
    (out, state), (out_chunked, state_chunked) = (step(m, X, m.empty_state(2)) for m in (recurrent, chunked))
    np.testing.assert_allclose(out, out_chunked, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state["state"], state_chunked["state"], rtol=1e-5, atol=1e-6)
    with pytest.raises(rfa.InputError, match=r"recurrent_below must be an int >= 0"):
        rfa.nnx.GatedDeltaNet(4, 32, recurrent_below=-1, rngs=nnx.Rngs(0))
