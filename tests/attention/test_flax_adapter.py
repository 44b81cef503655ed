import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import references
from flax import nnx
from helpers import normal

import rfa
from rfa.layers import RandomProjection

B, L, FEATURES, HEADS = 2, 16, 32, 4
HEAD_DIM = FEATURES // HEADS
X = normal(0, (B, L, FEATURES))


def make_mha(estimator="positive", seed=0):
    fn = rfa.make_attention_fn(estimator, 64, head_dim=HEAD_DIM, key=jax.random.key(seed))
    return nnx.MultiHeadAttention(HEADS, FEATURES, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))


@pytest.mark.slow
def test_equals_kernelized_attention_on_the_heads():
    fn = rfa.make_attention_fn("hyperbolic", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    q, k, v = (normal(i, (B, L, HEADS, HEAD_DIM)) for i in range(3))
    expected = rfa.kernelized_attention(q, k, v, estimator="hyperbolic", projection=fn.projection[...])
    np.testing.assert_allclose(fn(q, k, v), expected, rtol=1e-6)


def test_a_maps_random_parameters_are_drawn_with_the_projection_and_redrawn():
    """hybrid's R: drawn with W from the key (``fm.draw``), passed to the map, replaced by ``redraw``."""
    fn = rfa.make_attention_fn("hybrid", 16, head_dim=HEAD_DIM, key=jax.random.key(0))
    W, sampled = rfa.estimator("hybrid").draw(jax.random.key(0), 16, HEAD_DIM)
    np.testing.assert_array_equal(fn.random_params["angular"][...], sampled["angular"])
    q, k, v = (normal(i, (B, L, HEADS, HEAD_DIM), 0.3) for i in range(3))
    expected = rfa.kernelized_attention(q, k, v, estimator="hybrid", projection=W, feature_params=sampled)
    np.testing.assert_allclose(fn(q, k, v), expected, rtol=1e-6)
    fn.redraw(jax.random.key(1))
    np.testing.assert_array_equal(
        fn.random_params["angular"][...], rfa.estimator("hybrid").draw(jax.random.key(1), 16, HEAD_DIM)[1]["angular"]
    )


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


@pytest.mark.slow
def test_is_causal_is_honoured():
    mha = make_mha()
    changed = X.copy()
    changed[:, 10:] = normal(1, changed[:, 10:].shape)
    a, b = mha(X, is_causal=True), mha(changed, is_causal=True)
    np.testing.assert_allclose(a[:, :10], b[:, :10], rtol=1e-5, atol=1e-6)
    assert float(jnp.abs(a[:, 10:] - b[:, 10:]).max()) > 1e-3


@pytest.mark.slow
def test_key_padding_mask_equals_truncation():
    mha = make_mha()
    keep = np.arange(L)[None, None, None, :] < 11
    padded = mha(X, mask=jnp.asarray(keep))
    np.testing.assert_allclose(padded[:, :11], mha(X[:, :11]), rtol=1e-5, atol=1e-6)


def test_deterministic_map_has_no_projection():
    mha = make_mha("elu")
    assert mha.attention_fn.projection is None
    assert mha(X).shape == X.shape


@pytest.mark.slow
def test_gradients_are_those_of_kernelized_attention():
    """The adapter passes q, k, v's gradients through untouched (the kernel's own are checked against the
    float64 reference in test_against_references.py)."""
    fn = rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    q, k, v = (normal(i, (B, L, HEADS, HEAD_DIM)) for i in range(3))

    def loss(attention):
        return lambda q, k, v: jnp.sum(jnp.sin(attention(q, k, v)))

    direct = functools.partial(
        rfa.kernelized_attention, estimator="positive", projection=fn.projection[...], is_causal=True
    )
    through_adapter = jax.jit(jax.grad(loss(functools.partial(fn, is_causal=True)), argnums=(0, 1, 2)))(q, k, v)
    for got, want in zip(through_adapter, jax.grad(loss(direct), argnums=(0, 1, 2))(q, k, v), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


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
        q, q, q, estimator="gerf", projection=fn.projection[...], feature_params={"A": -0.1}
    )
    np.testing.assert_allclose(fn(q, q, q), expected, rtol=1e-6)
    with pytest.raises(TypeError, match=r"feature_params.*Python numbers.*A="):
        rfa.make_attention_fn("gerf", 64, head_dim=HEAD_DIM, key=jax.random.key(0), feature_params={"A": jnp.zeros(4)})


# Unmodified Flax modules with rfa's attention_fn: masks as Flax builds them, and Flax's decode cache.

LENGTHS = (L, 11)
RIGHT = np.arange(L)[None, :] < np.array(LENGTHS)[:, None]  # [B, L]: row 1 padded on the right
LEFT = RIGHT[:, ::-1].copy()  # padded on the left: the decoder's queries see the padding
PHI_SQ = 2 * HEAD_DIM**0.5  # |q + k|²/√d for unit-variance q and k


@nnx.jit
def _nnx_apply(module, x, mask):
    return module(x, mask=mask)


@nnx.jit
def _nnx_decode_step(module, token):
    return module(token, decode=True)


class NNXSite:
    """``nnx.MultiHeadAttention`` with ``attention_fn=fn`` (parameters from ``nnx.Rngs(0)`` whatever fn is)."""

    def __init__(self, fn=None):
        kwargs = {} if fn is None else {"attention_fn": fn}
        self.module = nnx.MultiHeadAttention(HEADS, FEATURES, decode=False, rngs=nnx.Rngs(0), **kwargs)

    def __call__(self, x, mask=None):
        return _nnx_apply(self.module, x, mask)

    def decode(self, x):
        self.module.init_cache(x.shape)
        return jnp.concatenate([_nnx_decode_step(self.module, x[:, t : t + 1]) for t in range(x.shape[1])], axis=1)


class LinenSite:
    """linen ``MultiHeadDotProductAttention`` with ``attention_fn=fn``, parameters from ``key(0)``."""

    def __init__(self, fn=None):
        kwargs = {} if fn is None else {"attention_fn": fn}
        self.layer = nn.MultiHeadDotProductAttention(num_heads=HEADS, qkv_features=FEATURES, **kwargs)
        self.params = self.layer.init(jax.random.key(0), X)["params"]
        self.apply = jax.jit(lambda params, x, mask: self.layer.apply({"params": params}, x, mask=mask))

    def __call__(self, x, mask=None):
        return self.apply(self.params, x, mask)

    def decode(self, x):
        layer = self.layer.clone(decode=True)
        cache = layer.init(jax.random.key(0), x)["cache"]
        step = jax.jit(
            lambda cache, token: layer.apply({"params": self.params, "cache": cache}, token, mutable=["cache"])
        )
        outputs = []
        for t in range(x.shape[1]):
            out, variables = step(cache, x[:, t : t + 1])
            cache = variables["cache"]
            outputs.append(out)
        return jnp.concatenate(outputs, axis=1)


SITES = {"nnx": NNXSite, "linen": LinenSite}


def flax_mask(site: str, valid):
    """The mask a Flax model builds (float32 0/1): padding for an encoder, causal ∧ padding for a decoder."""
    padding = nnx.make_attention_mask(valid, valid)
    return padding if site == "encoder" else nnx.combine_masks(nnx.make_causal_mask(valid), padding)


@pytest.mark.slow
@pytest.mark.parametrize("api", SITES)
@pytest.mark.parametrize("site", ["encoder", "decoder"])
def test_flax_padded_batch_equals_truncated_sequences(api, site):
    """Padding (right for the encoder, left for the decoder, where causal queries see it) holding NaN."""
    attention = SITES[api](rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0)))
    valid = RIGHT if site == "encoder" else LEFT
    out = attention(np.where(valid[..., None], X, np.nan), flax_mask(site, valid))
    n = LENGTHS[1]
    kept = slice(0, n) if site == "encoder" else slice(L - n, L)
    alone = attention(X[1:, kept], None if site == "encoder" else nnx.make_causal_mask(jnp.ones((1, n))))
    np.testing.assert_allclose(out[1:, kept], alone, rtol=1e-5, atol=1e-5)
    full = attention(X[:1], None if site == "encoder" else nnx.make_causal_mask(jnp.ones((1, L))))
    np.testing.assert_allclose(out[:1], full, rtol=1e-5, atol=1e-5)
    assert bool(jnp.all(jnp.isfinite(out)))


@pytest.mark.slow
@pytest.mark.parametrize("api", SITES)
@pytest.mark.parametrize("site", ["encoder", "decoder"])
def test_flax_outputs_approach_exact_attention_as_m_grows(api, site):
    """The same module with Flax's own softmax attention (same parameters) is the target."""
    x, valid = 0.5 * X, LEFT
    mask = flax_mask(site, valid)
    exact = SITES[api]()(x, mask)
    errors = []
    for m in (8, 128, 2048):
        attention = SITES[api](rfa.make_attention_fn("positive", m, head_dim=HEAD_DIM, key=jax.random.key(m)))
        errors.append(float(jnp.mean((attention(x, mask) - exact)[valid] ** 2)))
    assert errors == sorted(errors, reverse=True), errors
    assert errors[-1] < errors[0] / 20, errors


@pytest.mark.parametrize("api", SITES)
@pytest.mark.parametrize(("name", "params"), [("positive", None), ("elu", None), ("oprf", {"phi_sq": PHI_SQ})])
def test_flax_decode_cache_equals_the_causal_pass(api, name, params):
    """decode=True: one query against Flax's key/value cache and its mask, token by token."""
    fn = rfa.make_attention_fn(name, 64, head_dim=HEAD_DIM, key=jax.random.key(0), feature_params=params)
    attention = SITES[api](fn)
    full = attention(X, nnx.make_causal_mask(jnp.ones((B, L))))
    np.testing.assert_allclose(attention.decode(X), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("api", SITES)
def test_flax_decode_with_a_data_fitted_map_says_what_to_pass(api):
    attention = SITES[api](rfa.make_attention_fn("oprf", 64, head_dim=HEAD_DIM, key=jax.random.key(0)))
    with pytest.raises(ValueError, match=r"q_len=1 != kv_len=16.*feature_params=\{'phi_sq': value\}"):
        attention.decode(X)


def test_linen_passes_every_keyword_it_has():
    """Dropout configured but off (deterministic), a dtype and a precision: all accepted by the attention_fn."""
    fn = rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    layer = nn.MultiHeadDotProductAttention(
        num_heads=HEADS,
        qkv_features=FEATURES,
        attention_fn=fn,
        dropout_rate=0.1,
        deterministic=True,
        dtype=jnp.float32,
        precision=jax.lax.Precision.HIGHEST,
        broadcast_dropout=False,
    )
    variables = layer.init(jax.random.key(0), X)
    expected = LinenSite(fn)
    np.testing.assert_allclose(layer.apply(variables, X), expected.layer.apply(variables, X), rtol=1e-5, atol=1e-6)


def test_a_bias_is_refused():
    fn = rfa.make_attention_fn("positive", 64, head_dim=HEAD_DIM, key=jax.random.key(0))
    q = normal(1, (B, L, HEADS, HEAD_DIM))
    with pytest.raises(ValueError, match="bias must be None"):
        fn(q, q, q, bias=jnp.zeros((B, HEADS, L, L)))


@pytest.mark.parametrize("num_heads", [HEADS, None], ids=["per-head", "shared"])
def test_hedgehog_learns_its_map_inside_nnx_multi_head_attention(num_heads):
    """The learned map is nnx.Params of the attention_fn: equal to the float64 reference with those
    parameters, and trained by an nnx.Optimizer with the rest of the model."""
    fn = rfa.make_attention_fn("hedgehog", 6, head_dim=HEAD_DIM, num_heads=num_heads)
    mha = nnx.MultiHeadAttention(HEADS, FEATURES, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
    weight = fn.learned_params["weight"]
    assert isinstance(weight, nnx.Param) and weight[...].shape == (num_heads or 1, 1, HEAD_DIM, 6)
    weight[...] = normal(5, weight[...].shape)  # away from the identity start
    q, k, v = (np.asarray(layer(X)) for layer in (mha.query, mha.key, mha.value))
    expected = references.kernelized_attention(
        q, k, v, "hedgehog", causal=True, weight=weight[...][:, 0], bias=fn.learned_params["bias"][...][:, 0]
    )
    np.testing.assert_allclose(
        mha.out(jnp.asarray(expected, jnp.float32)), mha(X, is_causal=True), rtol=1e-4, atol=1e-5
    )
    optimizer = nnx.Optimizer(mha, optax.sgd(0.1), wrt=nnx.Param)
    before = np.asarray(weight[...])
    grads = nnx.grad(lambda m: jnp.sum(m(X, is_causal=True) ** 2))(mha)
    optimizer.update(mha, grads)
    assert not np.allclose(weight[...], before)


@pytest.mark.parametrize("kind", ["iid", "orthogonal"])
def test_the_projection_is_drawn_of_its_kind(kind):
    fn = rfa.make_attention_fn("positive", HEAD_DIM, head_dim=HEAD_DIM, key=jax.random.key(3), projection_kind=kind)
    W = np.asarray(fn.projection[...], np.float64)
    off_diagonal = np.abs(W @ W.T - np.diag(np.diag(W @ W.T))).max() / np.diag(W @ W.T).max()
    assert off_diagonal < 1e-5 if kind == "orthogonal" else off_diagonal > 0.1  # iid rows are not orthogonal
