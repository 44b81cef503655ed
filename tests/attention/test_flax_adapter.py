import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from helpers import normal

import rfa
from rfa.attention import RandomProjection

B, L, FEATURES, HEADS = 2, 16, 32, 4
HEAD_DIM = FEATURES // HEADS
X = normal(0, (B, L, FEATURES))


def make_mha(feature_map="positive", seed=0):
    fn = rfa.make_attention_fn(feature_map, 64, head_dim=HEAD_DIM, key=jax.random.key(seed))
    return nnx.MultiHeadAttention(HEADS, FEATURES, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))


def test_equals_kernelized_attention_on_the_heads():
    fn = rfa.make_attention_fn("hyperbolic", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    q, k, v = (normal(i, (B, L, HEADS, HEAD_DIM)) for i in range(3))
    expected = rfa.kernelized_attention(q, k, v, feature_map="hyperbolic", projection=fn.projection[...])
    np.testing.assert_allclose(fn(q, k, v), expected, rtol=1e-6)


def test_projection_is_a_non_trainable_variable_of_the_model():
    mha = make_mha()
    assert nnx.state(mha, RandomProjection)["attention_fn"]["projection"][...].shape == (64, HEAD_DIM)
    optimizer = nnx.Optimizer(mha, optax.adam(1e-3), wrt=nnx.Param)
    before = np.asarray(mha.attention_fn.projection[...])

    @nnx.jit
    def train_step(model, optimizer):
        grads = nnx.grad(lambda model: jnp.sum(model(X) ** 2))(model)
        optimizer.update(model, grads)

    train_step(mha, optimizer)
    np.testing.assert_array_equal(mha.attention_fn.projection[...], before)


def test_redraw_under_nnx_jit_changes_outputs_without_retracing():
    mha = make_mha()
    traces = []

    @nnx.jit
    def forward(model, x):
        traces.append(None)
        return model(x)

    first = forward(mha, X)
    np.testing.assert_array_equal(forward(mha, X), first)  # evaluation is deterministic
    mha.attention_fn.redraw(jax.random.key(1))
    redrawn = forward(mha, X)
    assert len(traces) == 1
    assert float(jnp.abs(redrawn - first).max()) > 1e-4
    mha.attention_fn.redraw(jax.random.key(1))
    np.testing.assert_array_equal(forward(mha, X), redrawn)


def test_is_causal_is_honoured():
    mha = make_mha()
    changed = X.copy()
    changed[:, 10:] = normal(1, changed[:, 10:].shape)
    a, b = mha(X, is_causal=True), mha(changed, is_causal=True)
    np.testing.assert_allclose(a[:, :10], b[:, :10], rtol=1e-5, atol=1e-6)
    assert float(jnp.abs(a[:, 10:] - b[:, 10:]).max()) > 1e-3


def test_key_padding_mask_equals_truncation():
    mha = make_mha()
    keep = np.arange(L)[None, None, None, :] < 11
    padded = mha(X, mask=jnp.asarray(keep))
    np.testing.assert_allclose(padded[:, :11], mha(X[:, :11]), rtol=1e-5, atol=1e-6)


def test_deterministic_map_has_no_projection():
    mha = make_mha("elu")
    assert mha.attention_fn.projection is None
    assert mha(X).shape == X.shape


def test_gradients_are_finite():
    mha = make_mha()
    grads = nnx.grad(lambda model: jnp.sum(model(X, is_causal=True) ** 2))(mha)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


def test_works_with_linen_attention():
    fn = rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    layer = nn.MultiHeadDotProductAttention(num_heads=HEADS, qkv_features=FEATURES, attention_fn=fn)
    variables = layer.init(jax.random.key(0), X)
    out = jax.jit(layer.apply)(variables, X)
    assert out.shape == X.shape and bool(jnp.all(jnp.isfinite(out)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"sow_weights": True, "deterministic": True}, "sow"), ({"rngs": None, "deterministic": False}, "dropout")],
)
def test_features_needing_the_attention_matrix_are_refused(kwargs, message):
    fn = rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    mha = nnx.MultiHeadAttention(HEADS, FEATURES, attention_fn=fn, dropout_rate=0.1, decode=False, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message):
        mha(X, **kwargs)


def test_feature_params_are_scalars():
    fn = rfa.make_attention_fn("gerf", 64, head_dim=HEAD_DIM, key=jax.random.key(0), feature_params={"A": -0.1})
    q = normal(1, (B, L, HEADS, HEAD_DIM))
    expected = rfa.kernelized_attention(
        q, q, q, feature_map="gerf", projection=fn.projection[...], feature_params={"A": -0.1}
    )
    np.testing.assert_allclose(fn(q, q, q), expected, rtol=1e-6)
    with pytest.raises(TypeError, match=r"feature_params.*Python numbers.*A="):
        rfa.make_attention_fn("gerf", 64, head_dim=HEAD_DIM, key=jax.random.key(0), feature_params={"A": jnp.zeros(4)})
