"""The Swin Transformer: windows, the shifted-window mask, window attention against a brute-force reference, the
whole model against the paper's forward in NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from flax import nnx
from helpers import normal
from references import _dense, _f64, _gelu, _layer_norm

from rfa.models import Site
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

KERNELIZED = SwinStage(windowed=False, attention=Site("positive", num_features=16))


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


def reference_swin(model: SwinTransformer, config: SwinConfig, images: np.ndarray) -> np.ndarray:
    """The Swin Transformer's forward in float64 from the paper (Liu et al., ICCV 2021), reading only ``model``'s
    parameters: the partition into p × p patches (each flattened row by row, then channels) and their linear embedding,
    LayerNorm, the learned absolute positions ("ape"); per stage, pre-norm blocks ``x + MSA(LN(x))``,
    ``x + MLP(LN(x))`` whose exact attention ``softmax(QKᵀ/√d + B)V`` is restricted to M × M windows, every other
    block's windows displaced by ⌊M/2⌋ (Fig. 2: the partial windows at the borders kept apart, which is what the
    cyclic shift and its mask compute), with the bias B of each head and relative offset (Δrow, Δcolumn) = query −
    key at table row ``(Δrow + M − 1)(2M − 1) + Δcolumn + M − 1``; a map no larger than M is one window and never
    shifted (the paper's code); a ``windowed=False`` stage attends over all its tokens (exact, no bias); between
    stages, each 2 × 2 group concatenated in the paper's order (top-left, bottom-left, top-right, bottom-right),
    LayerNorm, a linear map 4C → 2C without bias; then LayerNorm, the mean over the tokens and the head.

    Attention is computed densely over every token of the map with the windows as a mask, not window by window.
    """
    x, p = _f64(images), config.patch_size
    batch, height, width, channels = x.shape
    rows, columns = height // p, width // p
    kernel = _f64(model.embed.kernel[...]).reshape(p, p, channels, config.embed_dim)  # [row, column, channel, out]
    x = np.einsum("bxiyjc,ijcd->bxyd", x.reshape(batch, rows, p, columns, p, channels), kernel)  # [batch, R, C, d]
    x = _layer_norm(x + _f64(model.embed.bias[...]), model.embed_norm)
    x = x + _f64(model.positions.table[...]).reshape(rows, columns, -1)
    for i, stage in enumerate(config.stages):
        rows, columns = x.shape[1:3]
        if min(rows, columns) <= config.window_size:
            window, shift = min(rows, columns), 0
        else:
            window, shift = config.window_size, config.window_size // 2
        r, c = np.divmod(np.arange(rows * columns), columns)  # each token's row and column, raster order
        x = x.reshape(batch, rows * columns, -1)
        for j, block in enumerate(model.stages[i]):
            h = _layer_norm(x, block.attention_residual.norm)
            if stage.windowed:
                s = shift if j % 2 else 0  # windows displaced by s: the window of (r, c) is ⌊(r − s)/M⌋, ⌊(c − s)/M⌋
                same = ((r[:, None] - s) // window == (r[None] - s) // window) & (
                    (c[:, None] - s) // window == (c[None] - s) // window
                )
                dr, dc = r[:, None] - r[None] + window - 1, c[:, None] - c[None] + window - 1
                offset = np.where(same, dr * (2 * window - 1) + dc, 0)
                bias = _f64(block.attention.bias_table[...])[offset].transpose(2, 0, 1)  # [heads, L, L]
                qkv = h @ _f64(block.attention.qkv.kernel[...]) + _f64(block.attention.qkv.bias[...])
                q, k, v = (t.reshape(batch, rows * columns, stage.num_heads, -1) for t in np.split(qkv, 3, -1))
                o = references.softmax_attention(q, k, v, allowed_pairs=same, bias=bias)
                x = x + _dense(o.reshape(h.shape), block.attention.out)
            else:
                site = block.attention.attention
                q, k, v = _dense(h, site.query), _dense(h, site.key), _dense(h, site.value)  # [batch, L, heads, d]
                o = references.softmax_attention(q, k, v)
                x = x + np.tensordot(o, _f64(site.out.kernel[...]), axes=2) + _f64(site.out.bias[...])
            h = _layer_norm(x, block.mlp_residual.norm)
            x = x + _dense(_gelu(_dense(h, block.mlp.hidden)), block.mlp.output)
        x = x.reshape(batch, rows, columns, -1)
        if i + 1 < len(config.stages):
            merge = model.merges[i]
            x = np.concatenate([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], axis=-1)
            x = _layer_norm(x, merge.norm) @ _f64(merge.reduce.kernel[...])
    pooled = _layer_norm(x, model.norm).mean(axis=(1, 2))
    return _dense(pooled, model.head)


SWIN_CASES = {
    # 8x16 map: windows shifted by 2 in the second block; 4x8: one window high, so two windows never shifted;
    # 2x4: global exact attention. Non-square maps, so that rows and columns cannot be swapped unseen.
    "shifted-then-unshifted-then-global": SwinConfig(
        image_size=(16, 32),
        patch_size=2,
        channels=3,
        embed_dim=8,
        window_size=4,
        stages=(SwinStage(depth=2, num_heads=2), SwinStage(depth=2, num_heads=4), SwinStage(1, 2, windowed=False)),
    ),
    # 16x24 then 8x12 maps: the shift reaches both stages (and the patch merging between two shifted stages).
    "shifted-in-both-stages": SwinConfig(
        image_size=(32, 48),
        patch_size=2,
        channels=3,
        embed_dim=8,
        window_size=4,
        stages=(SwinStage(depth=2, num_heads=2), SwinStage(depth=2, num_heads=4)),
    ),
}


@pytest.mark.parametrize("config", list(SWIN_CASES.values()), ids=list(SWIN_CASES))
def test_the_swin_transformer_is_the_papers_forward_in_numpy(config):
    """rfa's Swin Transformer (float32, jitted) gives the logits of :func:`reference_swin` (float64) with the same
    weights, every one moved off its initial value (unit norm scales, zero biases, a near-zero bias table or position
    table would hide a misread or unused parameter)."""
    model = SwinTransformer(config, rngs=nnx.Rngs(0))
    params = nnx.state(model, nnx.Param)
    draws = iter(range(100, 10_000))
    nnx.update(model, jax.tree.map(lambda w: w + jnp.asarray(normal(next(draws), w.shape, 0.3)), params))
    images = normal(1, (2, *config.image_size, config.channels))
    got = jax.jit(lambda m, x: m(x))(model, jnp.asarray(images))
    expected = reference_swin(model, config, images)
    assert float(np.abs(expected).max()) > 0.1
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


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
            {"stages": (SwinStage(windowed=True, attention=Site("positive", num_features=16)),)},
            "stage 0 is windowed with attention 'kernelized': the shifted windows need a mask",
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
