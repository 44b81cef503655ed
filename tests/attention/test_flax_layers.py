"""rfa.nnx.MultiHeadAttention and rfa.linen.MultiHeadDotProductAttention inside real Flax models.

Each layer sits in a small pre-LayerNorm decoder block (embedding, masked self-attention, cross-attention to an
encoder memory with padding, MLP), once with Flax's own attention layer and once with rfa's, built from the
same seeds. The exact model is Flax's; the decoding reference is the model's own full causal pass.
"""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx

import rfa
from rfa.layers import RandomProjection

B, L, S, F, HEADS, VOCAB = 2, 12, 7, 32, 4, 50
TOKENS = jax.random.randint(jax.random.key(0), (B, L), 0, VOCAB)
MEMORY = 0.5 * jax.random.normal(jax.random.key(1), (B, S, F))
MEMORY_VALID = jnp.arange(S) < jnp.array([[S], [4]])  # row 1: 3 padded encoder positions
CAUSAL = nn.make_causal_mask(jnp.ones((B, L)))
CROSS = nn.make_attention_mask(jnp.ones((B, L)), MEMORY_VALID)
SLIDING_WINDOW = jnp.tril(jnp.ones((L, L))) - jnp.tril(jnp.ones((L, L)), -3)  # each query sees the last 3 keys
# q, k of standard deviation ~0.5: the regime where the positive estimator's error is moderate at small m
KERNEL_INIT = nnx.initializers.variance_scaling(0.25, "fan_in", "normal")
ADDITIVE = jnp.where(jnp.tril(jnp.ones((L, L))) > 0, 0.0, -jnp.inf)  # PyTorch's convention, 0 = attend


class NNXBlock(nnx.Module):
    def __init__(self, attention, *, rngs, **options):
        self.embed = nnx.Embed(VOCAB, F, rngs=rngs)
        self.norm1, self.norm2 = nnx.LayerNorm(F, rngs=rngs), nnx.LayerNorm(F, rngs=rngs)
        self.self_attention = attention(HEADS, F, decode=False, kernel_init=KERNEL_INIT, rngs=rngs, **options)
        self.cross_attention = attention(HEADS, F, decode=False, kernel_init=KERNEL_INIT, rngs=rngs, **options)
        self.mlp = nnx.Sequential(nnx.Linear(F, 2 * F, rngs=rngs), nnx.gelu, nnx.Linear(2 * F, F, rngs=rngs))

    def __call__(self, tokens, memory, *, mask=None, cross_mask=None, decode=False):
        h = self.embed(tokens)
        h = h + self.self_attention(self.norm1(h), mask=mask, decode=decode)
        h = h + self.cross_attention(self.norm2(h), memory, mask=cross_mask, decode=decode)
        return h + self.mlp(h)

    def init_cache(self, shape):
        self.self_attention.init_cache(shape)
        self.cross_attention.init_cache(shape)


class LinenBlock(nn.Module):
    attention: type
    options: dict
    decode: bool = False

    @nn.compact
    def __call__(self, tokens, memory, *, mask=None, cross_mask=None):
        h = nn.Embed(VOCAB, F)(tokens)
        attention = lambda: self.attention(  # noqa: E731
            num_heads=HEADS, qkv_features=F, decode=self.decode, kernel_init=KERNEL_INIT, **self.options
        )
        h = h + attention()(nn.LayerNorm()(h), mask=mask)
        h = h + attention()(nn.LayerNorm()(h), memory, mask=cross_mask)
        return h + nn.Dense(F)(nn.gelu(nn.Dense(2 * F)(h)))


def nnx_block(num_features=64, **options):
    return NNXBlock(rfa.nnx.MultiHeadAttention, rngs=nnx.Rngs(0), num_features=num_features, **options)


def linen_block(num_features=64, decode=False, **options):
    return LinenBlock(rfa.linen.MultiHeadDotProductAttention, {"num_features": num_features, **options}, decode)


def relative_error(a, b):
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


# NNX


def test_nnx_has_flax_weights_and_approaches_flax_exact_attention_as_m_grows():
    exact = NNXBlock(nnx.MultiHeadAttention, rngs=nnx.Rngs(0))
    reference = exact(TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS)
    params = jax.tree.map(jnp.shape, nnx.state(nnx_block(), nnx.Param))
    assert params == jax.tree.map(jnp.shape, nnx.state(exact, nnx.Param))  # swapping the class keeps the weights
    errors = [
        relative_error(nnx_block(m)(TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS), reference) for m in (8, 128, 2048)
    ]
    assert errors[0] > errors[1] > errors[2] and errors[2] < min(0.03, errors[0] / 4), errors


@pytest.mark.parametrize("estimator", ["positive", "elu"])
def test_nnx_decoding_token_by_token_equals_the_full_causal_pass(estimator):
    model = nnx_block(estimator=estimator)
    full = model(TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS)
    model.init_cache((B, L, F))
    step = nnx.jit(lambda model, token, memory, cross_mask: model(token, memory, cross_mask=cross_mask, decode=True))
    # The encoder's state is computed on the first step and read afterwards: later steps never see the memory.
    steps = [
        step(model, TOKENS[:, t : t + 1], MEMORY if t == 0 else 0 * MEMORY, CROSS[:, :, t : t + 1]) for t in range(L)
    ]
    np.testing.assert_allclose(jnp.concatenate(steps, axis=1), full, atol=2e-5)
    assert int(model.self_attention.cache_index[...]) == L
    model.init_cache((B, L, F))  # a prompt in one call, then one token at a time
    prompt = model(TOKENS[:, :5], MEMORY, cross_mask=CROSS[:, :, :5], mask=CAUSAL[:, :, :5, :5], decode=True)
    rest = [step(model, TOKENS[:, t : t + 1], 0 * MEMORY, CROSS[:, :, t : t + 1]) for t in range(5, L)]
    np.testing.assert_allclose(jnp.concatenate([prompt, *rest], axis=1), full, atol=2e-5)


def test_nnx_cache_is_the_recurrent_state_whatever_the_maximum_length():
    shapes = []
    for max_length in (16, 4096):
        model = nnx_block()
        model.init_cache((B, max_length, F))
        shapes.append(jax.tree.map(jnp.shape, nnx.state(model, nnx.Cache)))
        assert model.self_attention.cached_state.get_value().kv.shape == (B, HEADS, 64, F // HEADS + 1)
    assert shapes[0] == shapes[1]
    flax_layer = nnx.MultiHeadAttention(HEADS, F, decode=True, rngs=nnx.Rngs(0))
    flax_layer.init_cache((B, 4096, F))
    assert flax_layer.cached_key[...].shape == (B, 4096, HEADS, F // HEADS)  # Flax's grows with the length


def test_nnx_projection_is_state_redrawn_under_jit_and_saved_by_checkpoints(tmp_path):
    model = nnx_block()
    forward = nnx.jit(lambda model: model(TOKENS, MEMORY, mask=CAUSAL))
    before = forward(model)
    assert isinstance(model.self_attention.attention_fn.projection, RandomProjection)
    assert nnx.jit(rfa.nnx.redraw)(model, jax.random.key(5)) == 2
    after = forward(model)
    assert relative_error(after, before) > 1e-3
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "model", nnx.state(model))
    checkpointer.wait_until_finished()
    restored = nnx_block()  # drawn from the construction seed, not the redraw
    _, abstract = nnx.split(restored)
    nnx.update(restored, checkpointer.restore(tmp_path / "model", abstract))
    np.testing.assert_array_equal(forward(restored), after)


def test_nnx_grouped_query_heads_pair_as_flax_pairs_them_and_decode_as_the_full_pass():
    x = 0.5 * jax.random.normal(jax.random.key(2), (B, L, F))
    options = dict(num_kv_heads=2, kernel_init=KERNEL_INIT, decode=False)
    exact = nnx.MultiHeadAttention(HEADS, F, rngs=nnx.Rngs(0), **options)(x, mask=CAUSAL)
    layer = rfa.nnx.MultiHeadAttention(HEADS, F, num_features=2048, rngs=nnx.Rngs(0), **options)
    full = layer(x, mask=CAUSAL)
    assert relative_error(full, exact) < 0.02
    layer.init_cache(x.shape)
    np.testing.assert_allclose(
        jnp.concatenate([layer(x[:, t : t + 1], decode=True) for t in range(L)], 1), full, atol=2e-5
    )


# Linen


def test_linen_has_flax_parameters_and_approaches_flax_exact_attention_as_m_grows():
    exact = LinenBlock(nn.MultiHeadDotProductAttention, {})
    variables = exact.init(jax.random.key(0), TOKENS, MEMORY)
    reference = exact.apply(variables, TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS)
    errors = []
    for m in (8, 128, 2048):
        model = linen_block(m)
        ours = model.init(jax.random.key(0), TOKENS, MEMORY)
        assert jax.tree.map(jnp.shape, ours["params"]) == jax.tree.map(jnp.shape, variables["params"])
        errors.append(relative_error(model.apply(ours, TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS), reference))
    assert errors[0] > errors[1] > errors[2] and errors[2] < min(0.03, errors[0] / 4), errors


def test_linen_decoding_token_by_token_equals_the_full_causal_pass():
    model = linen_block()
    variables = model.init(jax.random.key(0), TOKENS, MEMORY)
    full = model.apply(variables, TOKENS, MEMORY, mask=CAUSAL, cross_mask=CROSS)
    decoder = linen_block(decode=True)
    cache = decoder.init(jax.random.key(0), TOKENS[:, :1], MEMORY)["cache"]

    @jax.jit
    def step(cache, token, memory, cross_mask):
        return decoder.apply({**variables, "cache": cache}, token, memory, cross_mask=cross_mask, mutable=["cache"])

    outputs = []
    for t in range(L):  # the memory is read on the first step only
        y, updated = step(cache, TOKENS[:, t : t + 1], MEMORY if t == 0 else 0 * MEMORY, CROSS[:, :, t : t + 1])
        cache = updated["cache"]
        outputs.append(y)
    np.testing.assert_allclose(jnp.concatenate(outputs, axis=1), full, atol=2e-5)


def test_linen_cache_size_does_not_depend_on_the_maximum_length():
    decoder = linen_block(decode=True)
    shapes = [
        jax.tree.map(
            jnp.shape, jax.eval_shape(decoder.init, jax.random.key(0), jnp.zeros((B, n), int), MEMORY)["cache"]
        )
        for n in (16, 4096)
    ]
    assert shapes[0] == shapes[1]
    assert shapes[0]["MultiHeadDotProductAttention_0"]["state"].kv == (B, HEADS, 64, F // HEADS + 1)


def test_linen_redraw_under_jit_changes_the_output_and_the_projection_survives_a_checkpoint(tmp_path):
    model = linen_block()
    variables = model.init(jax.random.key(0), TOKENS, MEMORY)
    assert set(variables) == {"params", "random_features"}
    forward = jax.jit(lambda variables: model.apply(variables, TOKENS, MEMORY, mask=CAUSAL))

    def redraw(variables, key):
        return model.apply(
            variables, TOKENS, MEMORY, mask=CAUSAL, rngs={"random_features": key}, mutable=["random_features"]
        )

    redraw = jax.jit(redraw)
    before = forward(variables)
    np.testing.assert_array_equal(forward(variables), before)  # no redraw without the rng: deterministic
    y, updated = redraw(variables, jax.random.key(9))
    redrawn = {**variables, **updated}
    assert relative_error(forward(redrawn), before) > 1e-3
    np.testing.assert_allclose(forward(redrawn), y, rtol=1e-6)  # the call that redraws uses the new draw
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "variables", redrawn)
    checkpointer.wait_until_finished()
    restored = checkpointer.restore(tmp_path / "variables", jax.tree.map(np.zeros_like, redrawn))
    np.testing.assert_array_equal(forward(restored), forward(redrawn))


# Loud failures, both layers


def nnx_layer():
    return rfa.nnx.MultiHeadAttention(HEADS, F, num_features=16, decode=False, rngs=nnx.Rngs(0))


def linen_apply():
    layer = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, qkv_features=F, num_features=16)
    x = jnp.ones((B, L, F))
    variables = layer.init(jax.random.key(0), x)
    return lambda x, mask: layer.apply(variables, x, mask=mask)


X = 0.5 * jax.random.normal(jax.random.key(3), (B, L, F))


def test_the_layers_take_the_keyword_of_before_0_3_with_a_warning():
    """``feature_map=`` is ``estimator=`` (docs/changelog.md): the same layer, and a Linen clone carries ``estimator``
    alone."""
    with pytest.warns(DeprecationWarning, match=r"MultiHeadAttention.__init__\(feature_map=...\)"):
        old = rfa.nnx.MultiHeadAttention(HEADS, F, feature_map="elu", decode=False, rngs=nnx.Rngs(0))
    new = rfa.nnx.MultiHeadAttention(HEADS, F, estimator="elu", decode=False, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(old(X), new(X))
    with pytest.warns(DeprecationWarning, match=r"MultiHeadDotProductAttention\(feature_map=...\)"):
        linen = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, feature_map="elu")
    assert (linen.estimator, linen.clone().feature_map) == ("elu", None)
    variables = linen.init(jax.random.key(0), X)
    reference = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, estimator="elu")
    np.testing.assert_array_equal(linen.apply(variables, X), reference.apply(variables, X))
    with pytest.warns(DeprecationWarning, match=r"make_attention_fn\(feature_map=...\)"):
        assert rfa.make_attention_fn(feature_map="elu", head_dim=F // HEADS).estimator.name == "elu"


@pytest.mark.parametrize("kind", ["nnx", "linen"])
def test_an_unsupported_traced_mask_raises_when_the_compiled_layer_runs(kind):
    """The documented pattern: ``rfa.checks.checked`` around the jitted call, one exception type
    (``rfa.InputError``) and the eager message."""
    if kind == "nnx":
        layer = nnx_layer()
        eager, call = (lambda x, mask: layer(x, mask=mask)), nnx.jit(lambda layer, x, mask: layer(x, mask=mask))
        args = (layer,)
    else:
        eager, args = linen_apply(), ()
        call = jax.jit(eager)
    assert np.all(np.isfinite(call(*args, X, CAUSAL)))
    with pytest.raises(rfa.InputError) as eagerly:
        eager(X, SLIDING_WINDOW)
    with pytest.raises(rfa.InputError) as jitted:
        rfa.checks.checked(call)(*args, X, SLIDING_WINDOW)
    assert str(jitted.value) == str(eagerly.value) and "lower-triangular but not causal" in str(eagerly.value)


@pytest.mark.parametrize("kind", ["nnx", "linen"])
def test_an_additive_mask_is_refused_eagerly_and_under_jit(kind):
    layer = nnx_layer() if kind == "nnx" else None
    call = (lambda x, mask: layer(x, mask=mask)) if kind == "nnx" else linen_apply()
    with pytest.raises(
        ValueError,
        match=re.escape(
            "nonzero (True) = attend, so an all-zero mask attends nothing. Convert it with `mask = additive_mask == 0`"
        ),
    ):
        call(X, ADDITIVE)
    with pytest.raises(Exception, match="looks like an additive mask"):
        jax.block_until_ready(jax.jit(call)(X, ADDITIVE))


def test_a_decoding_mask_over_the_maximum_length_is_refused_with_the_reason():
    layer = nnx_layer()
    layer.init_cache((B, L, F))
    with pytest.raises(ValueError, match="the cache is the recurrent state of the earlier tokens"):
        layer(X[:, :1], mask=CAUSAL[:, :, :1, :], decode=True)


def test_attention_weight_dropout_and_a_custom_attention_fn_are_refused():
    with pytest.raises(TypeError, match="builds its own attention_fn"):
        rfa.nnx.MultiHeadAttention(HEADS, F, attention_fn=nnx.dot_product_attention, rngs=nnx.Rngs(0))
    layer = rfa.nnx.MultiHeadAttention(HEADS, F, num_features=16, dropout_rate=0.1, decode=False, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="attention-weight dropout"):
        layer(X, deterministic=False)
    layer.init_cache(X.shape)  # decoding refuses them too
    with pytest.raises(ValueError, match="attention-weight dropout"):
        layer(X[:, :1], decode=True, deterministic=False)
    with pytest.raises(ValueError, match="no attention weights to sow"):
        layer(X[:, :1], decode=True, deterministic=True, sow_weights=True)
    linen = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, dropout_rate=0.1, deterministic=False)
    with pytest.raises(ValueError, match="attention-weight dropout"):
        linen.init(jax.random.key(0), X)


def test_linen_and_nnx_refuse_what_flax_would_not_do_silently():
    """A custom attention_fn or force_fp32_for_softmax raises in Linen as attention_fn does in NNX; a call without
    ``decode`` anywhere raises as Flax's does; a redraw rng without ``mutable`` raises instead of keeping W."""
    for fields in (
        {"attention_fn": lambda *a, **k: None},
        {"force_fp32_for_softmax": True},
        {"qk_attn_weights_einsum_cls": lambda: jnp.einsum},
    ):
        with pytest.raises(TypeError, match=r"attention_fn|no softmax|no attention weights"):
            rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, **fields)
    calls = []

    def counted(*args, **kwargs):  # Flax's dot_general hook reaches rfa's projections, as it reaches Flax's
        calls.append(1)
        return jax.lax.dot_general(*args, **kwargs)

    hooked = rfa.linen.MultiHeadDotProductAttention(
        num_heads=HEADS, num_features=16, qkv_dot_general=counted, out_dot_general=counted
    )
    hooked.init(jax.random.key(0), X)
    assert len(calls) == 4  # query, key, value, out
    flax_layer = nnx.MultiHeadAttention(HEADS, F, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="No `decode` argument") as flax_error:
        flax_layer(X)
    with pytest.raises(ValueError, match="No `decode` argument") as rfa_error:
        rfa.nnx.MultiHeadAttention(HEADS, F, num_features=16, rngs=nnx.Rngs(0))(X)
    assert str(rfa_error.value) == " ".join(str(flax_error.value).split())
    layer = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, num_features=16)
    variables = layer.init(jax.random.key(0), X)
    with pytest.raises(ValueError, match='mutable=\\["random_features"\\]'):
        layer.apply(variables, X, rngs={"random_features": jax.random.key(1)})
    redrawn = layer.apply(variables, X, rngs={"random_features": jax.random.key(1)}, mutable=["random_features"])
    assert not np.allclose(redrawn[1]["random_features"]["projection"], variables["random_features"]["projection"])


def test_rfa_nnx_save_and_restore_keep_the_projection_and_refuse_a_checkpoint_of_parameters_only(tmp_path):
    """The documented round trip restores outputs exactly into a model built from another seed; a checkpoint of
    ``nnx.state(model, nnx.Param)`` (which silently changed outputs: the fresh model keeps its own W) is refused
    with what to do. Linen's variables without ``random_features`` are refused likewise."""
    model = nnx_block()
    assert nnx.jit(rfa.nnx.redraw)(model, jax.random.key(5)) == 2
    forward = nnx.jit(lambda model: model(TOKENS, MEMORY, mask=CAUSAL))
    rfa.nnx.save(tmp_path / "full", model)
    restored = nnx_block()  # its own W, drawn from the construction seed
    rfa.nnx.restore(tmp_path / "full", restored)
    np.testing.assert_array_equal(forward(restored), forward(model))
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "params", nnx.state(model, nnx.Param))
    checkpointer.wait_until_finished()
    with pytest.raises(rfa.InputError, match=r"holds no random projection .*save with rfa.nnx.save"):
        rfa.nnx.restore(tmp_path / "params", nnx_block())
    layer = rfa.linen.MultiHeadDotProductAttention(num_heads=HEADS, num_features=16)
    variables = layer.init(jax.random.key(0), X)
    with pytest.raises(rfa.InputError, match="the variables hold no random_features/projection"):
        layer.apply({"params": variables["params"]}, X)
