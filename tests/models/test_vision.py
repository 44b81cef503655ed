"""The Vision Transformer: patches, position tables, embeddings, attention kinds and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from flax import nnx
from helpers import normal

from rfa.layers.positional import sinusoidal_grid
from rfa.models import Site, VisionConfig, VisionTransformer
from rfa.models.vision import patches

SMALL = dict(image_size=(8, 12), patch_size=4, channels=3, d_model=16, num_heads=2, mlp_dim=32, num_layers=1)


def reference_patches(images, p):
    """Patches by explicit loops: raster order over the grid, each patch flattened row by row (then channels)."""
    batch, height, width, _ = images.shape
    out = []
    for b in range(batch):
        rows = []
        for i in range(height // p):
            for j in range(width // p):
                rows.append(images[b, i * p : (i + 1) * p, j * p : (j + 1) * p, :].reshape(-1))
        out.append(rows)
    return np.array(out)


@pytest.mark.parametrize(("embedding", "pooling"), [("linear", "cls"), ("conv", "mean")])
def test_the_vision_transformer_is_the_papers_forward_in_numpy(embedding, pooling):
    """Two layers of ViT in float64 from the model's weights: patches by loops, their linear embedding (a
    convolution's kernel read as the same map), the class token first, the learned positions, the pre-norm encoder
    (:func:`references.pre_norm_encoder`), then the head on the class token or on the mean of the patches."""
    config = VisionConfig(**(SMALL | dict(num_layers=2)), patch_embedding=embedding, pooling=pooling)
    model = VisionTransformer(config, rngs=nnx.Rngs(0))
    model.positions.table[...] = jnp.asarray(normal(3, model.positions.table.shape))  # no zeros left to hide a row
    images = normal(1, (2, 8, 12, 3))
    x = reference_patches(images, 4) @ np.asarray(model.embed.kernel[...], np.float64).reshape(4 * 4 * 3, 16)
    x = x + np.asarray(model.embed.bias[...], np.float64)
    if pooling == "cls":
        cls = np.broadcast_to(np.asarray(model.cls[...], np.float64), (2, 1, 16))
        x = np.concatenate([cls, x], axis=1)
    x = references.pre_norm_encoder(model.encoder, x + np.asarray(model.positions.table[...], np.float64))
    pooled = x[:, 0] if pooling == "cls" else x.mean(axis=1)
    expected = pooled @ np.asarray(model.head.kernel[...], np.float64) + np.asarray(model.head.bias[...])
    np.testing.assert_allclose(jax.jit(model.__call__)(jnp.asarray(images, jnp.float32)), expected, atol=2e-5)


def test_patches_are_the_image_tiles_in_raster_order():
    images = normal(0, (2, 8, 12, 3))
    got = jax.jit(patches, static_argnums=1)(jnp.asarray(images), 4)
    np.testing.assert_array_equal(np.asarray(got), reference_patches(images, 4))


def test_sinusoidal_grid_encodes_row_and_column_in_halves():
    table = sinusoidal_grid(3, 5, 8)
    assert table.shape == (15, 8)
    rows, columns = table[:, :4].reshape(3, 5, 4), table[:, 4:].reshape(3, 5, 4)
    assert np.all(rows == rows[:, :1]) and np.all(columns == columns[:1])  # row half constant along a row
    assert len({tuple(r) for r in table}) == 15  # every patch its own code
    np.testing.assert_allclose(rows[2, 0, :2], [np.sin(2.0), np.cos(2.0)], rtol=1e-6)  # PE(p, 0), PE(p, 1)


def test_conv_and_linear_patch_embeddings_are_the_same_map():
    linear = VisionTransformer(VisionConfig(**SMALL, patch_embedding="linear"), rngs=nnx.Rngs(0))
    conv = VisionTransformer(VisionConfig(**SMALL, patch_embedding="conv"), rngs=nnx.Rngs(0))
    conv.embed.kernel[...] = linear.embed.kernel[...].reshape(4, 4, 3, 16)  # (row, column, channel) as flattened
    conv.embed.bias[...] = linear.embed.bias[...]
    images = jnp.asarray(normal(1, (2, 8, 12, 3)))
    np.testing.assert_allclose(conv.tokens(images), linear.tokens(images), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("attention", [Site(), Site("positive", num_features=32)], ids=["exact", "positive"])
def test_patches_are_tokens_without_an_order_but_their_positions(attention):
    """Mean pooling and attention are permutation-equivariant: shuffling the patches together with their
    position embeddings leaves the logits unchanged, shuffling the patches alone changes them."""
    config = VisionConfig(**SMALL, pooling="mean", attention=attention)
    model = VisionTransformer(config, rngs=nnx.Rngs(0))
    images = jnp.asarray(normal(2, (2, 8, 12, 3)))
    logits = jax.jit(lambda m, x: m(x))(model, images)
    order = np.random.default_rng(0).permutation(config.num_patches)
    tiles = images.reshape(2, 2, 4, 3, 4, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 6, 4, 4, 3)
    shuffled = tiles[:, order].reshape(2, 2, 3, 4, 4, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 8, 12, 3)
    np.testing.assert_array_equal(
        reference_patches(np.asarray(shuffled), 4), reference_patches(np.asarray(images), 4)[:, order]
    )
    changed = model(shuffled)
    model.positions.table[...] = model.positions.table[...][order]
    np.testing.assert_allclose(model(shuffled), logits, rtol=2e-4, atol=2e-5)
    assert float(jnp.max(jnp.abs(changed - logits))) > 1e-3


@pytest.mark.slow
def test_a_vision_transformer_trains_under_jit():
    config = VisionConfig(**SMALL, attention=Site("positive", num_features=32))
    model = VisionTransformer(config, rngs=nnx.Rngs(0))
    images, labels = jnp.asarray(normal(3, (8, 8, 12, 3))), jnp.arange(8) % 10
    loss = lambda m: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(m(images)), labels[:, None], 1))  # noqa: E731
    grads = nnx.jit(nnx.grad(loss))(model)
    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(grads)]
    assert len(norms) > 10 and all(np.isfinite(norms)) and min(norms) >= 0 and max(norms) > 0
    assert float(jnp.linalg.norm(grads.positions.table[...])) > 0 and float(jnp.linalg.norm(grads.cls[...])) > 0


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"image_size": (8, 10)}, ValueError, "image_size 8x10 is not divisible by patch_size = 4"),
        ({"patch_size": 0}, ValueError, "patch_size must be a positive int, got 0"),
        ({"positional": "rotary"}, ValueError, r"positional must be one of \['learned', 'sinusoidal'\]"),
        ({"positional": "sinusoidal", "d_model": 18, "num_heads": 2}, ValueError, "d_model divisible by 4, got 18"),
        ({"pooling": "max"}, ValueError, r"pooling must be one of \['cls', 'mean'\]"),
        ({"d_model": 15}, ValueError, "d_model = 15 is not divisible by num_heads = 2"),
    ],
)
def test_bad_vision_configs_say_what_is_wrong(fields, error, message):
    with pytest.raises(error, match=message):
        VisionConfig(**{**SMALL, **fields})


def test_bad_images_say_what_is_wrong():
    model = VisionTransformer(VisionConfig(**SMALL), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"images must have shape \[batch, 8, 12, 3\] .* got \(2, 12, 8, 3\)"):
        model(jnp.zeros((2, 12, 8, 3)))
    with pytest.raises(TypeError, match="images must be floating point"):
        model(jnp.zeros((2, 8, 12, 3), jnp.uint8))
