"""The Swin Transformer: windows, the shifted-window mask, window attention against a brute-force reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import normal

from rfa.models import AttentionConfig
from rfa.models.swin import (
    SwinConfig,
    SwinStage,
    SwinTransformer,
    WindowAttention,
    relative_index,
    shifted_window_mask,
    window_merge,
    window_partition,
)

KERNELIZED = SwinStage(windowed=False, attention=AttentionConfig("positive", 16))


def test_windows_are_tiles_and_merge_back():
    x = jnp.asarray(normal(0, (2, 8, 12, 3)))
    windows = window_partition(x, 4)
    assert windows.shape == (2, 6, 16, 3)
    np.testing.assert_array_equal(windows[1, 4], np.asarray(x)[1, 4:8, 4:8].reshape(16, 3))  # row 1, column 1
    np.testing.assert_array_equal(window_merge(windows, 8, 12), x)


def test_relative_index_numbers_each_offset_once():
    index = relative_index(3)
    for p in range(9):
        for q in range(9):
            dy, dx = p // 3 - q // 3, p % 3 - q % 3
            assert index[p, q] == (dy + 2) * 5 + (dx + 2)
    assert index.min() == 0 and index.max() == 24


def test_shifted_window_mask_keeps_the_unshifted_maps_regions_apart():
    """Two tokens of a window may attend iff neither or both of them wrapped around each axis in the shift."""
    height, width, window, shift = 8, 12, 4, 2
    mask = shifted_window_mask(height, width, window, shift)
    rows, columns = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    wrapped = np.stack([rows + shift >= height, columns + shift >= width], -1)  # the shifted map's token came around
    flags = np.asarray(window_partition(jnp.asarray(wrapped[None].astype(np.int32)), window))[0]  # [windows, tokens, 2]
    expected = np.all(flags[:, :, None] == flags[:, None, :], axis=-1)
    np.testing.assert_array_equal(mask, expected)
    assert shifted_window_mask(height, width, window, 0).all()


def reference_window_attention(module: WindowAttention, x: np.ndarray) -> np.ndarray:
    """Every token attends to the tokens of its window in the shifted map that share its region, with the bias of
    their offset: dense float64 attention with explicit coordinates."""
    batch, height, width, channels = x.shape
    window, shift, heads = module.window, module.shift, module.num_heads
    head_dim = channels // heads
    xs = np.roll(x.astype(np.float64), (-shift, -shift), axis=(1, 2)).reshape(batch, height * width, channels)
    qkv = xs @ np.asarray(module.qkv.kernel[...], np.float64) + np.asarray(module.qkv.bias[...], np.float64)
    q, k, v = (part.reshape(batch, -1, heads, head_dim) for part in np.split(qkv, 3, axis=-1))
    rows, columns = np.divmod(np.arange(height * width), width)
    same_window = (rows[:, None] // window == rows[None] // window) & (
        columns[:, None] // window == columns[None] // window
    )
    wrap_r, wrap_c = rows + shift >= height, columns + shift >= width
    same_region = (wrap_r[:, None] == wrap_r[None]) & (wrap_c[:, None] == wrap_c[None]) if shift else True
    table = np.asarray(module.bias_table[...], np.float64)
    dy = rows[:, None] % window - rows[None] % window + window - 1
    dx = columns[:, None] % window - columns[None] % window + window - 1
    bias = table[dy * (2 * window - 1) + dx]  # [tokens, tokens, heads]
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(head_dim) + bias.transpose(2, 0, 1)
    logits = np.where(same_window & same_region, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, height * width, channels)
    out = out @ np.asarray(module.out.kernel[...], np.float64) + np.asarray(module.out.bias[...], np.float64)
    return np.roll(out.reshape(batch, height, width, channels), (shift, shift), axis=(1, 2))


@pytest.mark.parametrize("shift", [0, 2])
def test_window_attention_equals_dense_attention_with_the_window_mask_and_bias(shift):
    module = WindowAttention(8, 2, 4, shift, (8, 12), dtype=jnp.float32, rngs=nnx.Rngs(0))
    module.bias_table[...] = jnp.asarray(normal(1, module.bias_table.shape))  # a bias that matters
    x = normal(2, (2, 8, 12, 8))
    got = jax.jit(lambda m, x: m(x))(module, jnp.asarray(x))
    np.testing.assert_allclose(got, reference_window_attention(module, x), rtol=2e-4, atol=2e-5)


@pytest.mark.slow
def test_swin_with_a_windowed_and_a_kernelized_stage_trains_under_jit():
    config = SwinConfig(image_size=(8, 8), patch_size=1, window_size=4, stages=(SwinStage(depth=2), KERNELIZED))
    assert config.stage_sizes() == ((8, 8), (4, 4)) and config.stage_config(1).d_model == 64
    model = SwinTransformer(config, rngs=nnx.Rngs(0))
    images, labels = jnp.asarray(normal(3, (4, 8, 8, 1))), jnp.arange(4)
    loss = lambda m: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(m(images)), labels[:, None], 1))  # noqa: E731
    grads = nnx.jit(nnx.grad(loss))(model)
    table = grads.stages[0][1].attention.bias_table[...]  # the shifted block's bias
    assert float(jnp.linalg.norm(table)) > 0
    assert all(np.isfinite(float(jnp.linalg.norm(g))) for g in jax.tree.leaves(grads))


def test_a_map_no_larger_than_the_window_is_one_unshifted_window():
    config = SwinConfig(image_size=(8, 8), patch_size=2, window_size=4, stages=(SwinStage(), SwinStage()))
    model = SwinTransformer(config, rngs=nnx.Rngs(0))
    first, second = model.stages[0][1].attention, model.stages[1][1].attention
    assert (first.window, first.shift) == (4, 0) and (second.window, second.shift) == (2, 0)  # 4x4 then 2x2 maps


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"image_size": (8, 9), "patch_size": 2}, "image_size 8x9 is not divisible by patch_size = 2"),
        ({"window_size": 3}, "window_size = 3 does not divide stage 0's 8x8 map of patches"),
        (
            {"stages": (SwinStage(windowed=True, attention=AttentionConfig("positive", 16)),)},
            "stage 0 is windowed with attention 'positive': the shifted windows need a mask",
        ),
        (
            {"image_size": (6, 6), "window_size": 3, "stages": (SwinStage(), SwinStage(), SwinStage())},
            "stage 1 has a 3x3 map: patch merging needs even sides",
        ),
        ({"stages": ()}, "at least one SwinStage"),
    ],
)
def test_bad_swin_configs_say_what_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        SwinConfig(**{"image_size": (8, 8), "patch_size": 1, "window_size": 4, **fields})
