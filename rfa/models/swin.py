"""The Swin Transformer: attention inside shifted windows, a relative position bias, patch merging between stages.

Liu et al., "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows", ICCV 2021:
patches are embedded into a ``H × W`` map of tokens; each stage runs blocks whose self-attention is
restricted to non-overlapping ``M × M`` windows, every other block on windows shifted by ``M // 2``
(a cyclic shift of the map plus a mask that keeps tokens from different parts of the unshifted map
apart), with a learned bias per head and relative offset inside the window; between stages, 2×2
neighbouring tokens are concatenated and projected to twice the width (patch merging). A map no
larger than the window is one window, and then nothing is shifted (as in the paper's code).

The question "do windows or random features scale better?" is one switch per stage here:
``SwinStage(windowed=True)`` is exact attention in shifted windows, ``windowed=False`` attends over
all tokens of the stage with the stage's ``attention`` (a kernelized kind, or exact). The shifted
windows' mask is not key padding, query padding or causal, so kernelized attention cannot apply it
(:mod:`rfa.attention.masks`): a windowed stage with a kernelized kind is refused with that reason.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rfa._dtypes import at_least_float32
from rfa._validation import InputError
from rfa.layers.positional import PositionalEmbedding
from rfa.models.blocks import MLP, Residual, attention_site
from rfa.models.config import EncoderConfig
from rfa.models.site import Site
from rfa.models.vision import check_images, check_patching, patches

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class SwinStage:
    """One stage: ``depth`` blocks of ``num_heads`` heads, in (shifted) windows or global.

    Attributes:
      depth: blocks in the stage (windowed stages alternate plain and shifted windows).
      num_heads: attention heads.
      windowed: exact attention inside windows (True) or attention over every token of the stage (False).
      attention: the global attention of a stage with ``windowed=False`` (exact or kernelized).
    """

    depth: int = 2
    num_heads: int = 2
    windowed: bool = True
    attention: Site = dataclasses.field(default_factory=Site)


@dataclasses.dataclass(frozen=True)
class SwinConfig:
    """A Swin Transformer's image, patches, window, stages and head.

    Attributes:
      image_size: ``(height, width)`` in pixels, divisible by ``patch_size``.
      patch_size: side of the square patches.
      channels: colour channels.
      num_classes: classes of the head.
      embed_dim: width of the first stage; each patch merging doubles it.
      window_size: side M of the attention windows; it must divide every windowed stage's map (a map no
        larger than M is one window).
      stages: the stages, a patch merging between consecutive ones (each halves the map: even sides).
      mlp_ratio: MLP width over the stage's width.
      absolute_positions: learned position embeddings added to the patch embeddings (the paper's "ape");
        global kernelized stages see positions only through them.
      dropout_rate: on embeddings and sub-layer outputs.
      dtype: computation dtype.

    Example:
      >>> kernelized = SwinStage(windowed=False, attention=Site("positive", num_features=16))
      >>> config = SwinConfig(image_size=(8, 8), patch_size=1, window_size=4, stages=(SwinStage(), kernelized))
      >>> config.stage_sizes()
      ((8, 8), (4, 4))
    """

    image_size: tuple[int, int]
    patch_size: int
    channels: int = 1
    num_classes: int = 10
    embed_dim: int = 32
    window_size: int = 4
    stages: tuple[SwinStage, ...] = (SwinStage(), SwinStage())
    mlp_ratio: int = 2
    absolute_positions: bool = True
    dropout_rate: float = 0.0
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "image_size", check_patching(self))
        object.__setattr__(self, "stages", tuple(self.stages))
        if not self.stages:
            raise InputError("SwinConfig.stages must hold at least one SwinStage.")
        sizes = self.stage_sizes()
        for i, (stage, (rows, columns)) in enumerate(zip(self.stages, sizes, strict=True)):
            if i + 1 < len(self.stages) and (rows % 2 or columns % 2):
                raise InputError(f"stage {i} has a {rows}x{columns} map: patch merging needs even sides.")
            if stage.windowed:
                if not stage.attention.entry.dense_masks:
                    raise InputError(
                        f"stage {i} is windowed with attention {stage.attention.kind!r}: the shifted windows need a "
                        "mask that is neither padding nor causal, which kernelized attention cannot apply. Use "
                        "windowed=False for a kernelized stage (global attention over its tokens)."
                    )
                window = self.window(rows, columns)
                if rows % window or columns % window:
                    raise InputError(
                        f"window_size = {self.window_size} does not divide stage {i}'s {rows}x{columns} map of "
                        "patches: choose a window that divides every windowed stage's map."
                    )
        for i in range(len(self.stages)):
            self.stage_config(i)  # checks widths, heads and attention

    def stage_sizes(self) -> tuple[tuple[int, int], ...]:
        """The token map ``(rows, columns)`` of each stage."""
        rows, columns = self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size
        return tuple((rows >> i, columns >> i) for i in range(len(self.stages)))

    def window(self, rows: int, columns: int) -> int:
        """The window side at a ``rows × columns`` map: the configured one, or the whole map if that is smaller."""
        return min(self.window_size, rows, columns)

    def stage_config(self, i: int) -> EncoderConfig:
        """Stage ``i``'s widths, attention and MLP as an ``EncoderConfig`` (pre-norm, GELU)."""
        stage, (rows, columns) = self.stages[i], self.stage_sizes()[i]
        width = self.embed_dim * 2**i
        return EncoderConfig(
            d_model=width,
            num_heads=stage.num_heads,
            mlp_dim=self.mlp_ratio * width,
            num_encoder_layers=stage.depth,
            dropout_rate=self.dropout_rate,
            activation="gelu",
            norm="pre",
            max_length=rows * columns,
            encoder_attention=stage.attention,
            dtype=self.dtype,
        )


def window_partition(x: Array, window: int) -> Array:
    """``[batch, H, W, C]`` → ``[batch, windows, window², C]``, windows in raster order (as :func:`patches`)."""
    return patches(x, window).reshape(x.shape[0], -1, window * window, x.shape[-1])


def window_merge(windows: Array, height: int, width: int) -> Array:
    """Inverse of :func:`window_partition`."""
    batch, _, size, channels = windows.shape
    window = round(size**0.5)
    x = windows.reshape(batch, height // window, width // window, window, window, channels)
    return jnp.swapaxes(x, 2, 3).reshape(batch, height, width, channels)


def relative_index(window: int) -> np.ndarray:
    """``[window², window²]``: the bias-table row of each (query, key) pair, from their row and column offsets."""
    rows, columns = np.divmod(np.arange(window * window), window)
    dy = rows[:, None] - rows[None, :] + window - 1
    dx = columns[:, None] - columns[None, :] + window - 1
    return dy * (2 * window - 1) + dx


def shifted_window_mask(height: int, width: int, window: int, shift: int) -> np.ndarray:
    """``[windows, window², window²]`` booleans: after a cyclic shift by ``shift``, which tokens of a window came
    from the same region of the unshifted map (True = may attend). Without a shift every pair may attend."""
    regions = np.zeros((height, width), np.int64)
    if shift:
        bounds = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
        for i, rows in enumerate(bounds):
            for j, columns in enumerate(bounds):
                regions[rows, columns] = 3 * i + j
    labels = np.asarray(window_partition(jnp.asarray(regions)[None, :, :, None], window))[0, :, :, 0]
    return labels[:, :, None] == labels[:, None, :]


class WindowAttention(nnx.Module):
    """Exact multi-head attention inside (shifted) windows with a learned relative position bias."""

    def __init__(
        self, width: int, num_heads: int, window: int, shift: int, size: tuple[int, int], *, dtype, rngs: nnx.Rngs
    ):
        self.num_heads, self.window, self.shift, self.size = num_heads, window, shift, size
        self.qkv = nnx.Linear(width, 3 * width, dtype=dtype, rngs=rngs)
        self.out = nnx.Linear(width, width, dtype=dtype, rngs=rngs)
        init = nnx.initializers.truncated_normal(0.02)
        self.bias_table = nnx.Param(init(rngs.params(), ((2 * window - 1) ** 2, num_heads)))  # per head and offset
        self.index = nnx.Cache(jnp.asarray(relative_index(window)))
        self.mask = nnx.Cache(jnp.asarray(shifted_window_mask(*size, window, shift)))

    def __call__(self, x: Array) -> Array:
        batch, height, width, channels = x.shape
        if self.shift:
            x = jnp.roll(x, (-self.shift, -self.shift), axis=(1, 2))
        windows = window_partition(x, self.window)  # [batch, windows, tokens, C]
        count, tokens = windows.shape[1:3]
        heads, head_dim = self.num_heads, channels // self.num_heads
        q, k, v = jnp.split(self.qkv(windows).reshape(batch * count, tokens, 3 * heads, head_dim), 3, axis=2)
        bias = self.bias_table[...][self.index[...]].transpose(2, 0, 1)  # [heads, tokens, tokens]
        mask = jnp.broadcast_to(self.mask[...][None, :, None], (batch, count, heads, tokens, tokens))
        out = jax.nn.dot_product_attention(
            q, k, v, bias=bias[None].astype(q.dtype), mask=mask.reshape(batch * count, heads, tokens, tokens)
        )
        out = window_merge(self.out(out.reshape(batch, count, tokens, channels)), height, width)
        return jnp.roll(out, (self.shift, self.shift), axis=(1, 2)) if self.shift else out


class GlobalAttention(nnx.Module):
    """Attention over every token of the stage's map (its site's layer: exact or kernelized)."""

    def __init__(self, config: EncoderConfig, *, rngs: nnx.Rngs):
        self.attention = attention_site(config, config.encoder_attention, causal=False, cross=False, rngs=rngs)

    def __call__(self, x: Array) -> Array:
        batch, height, width, channels = x.shape
        tokens = x.reshape(batch, height * width, channels)
        positions = jnp.broadcast_to(jnp.arange(height * width), (batch, height * width))
        keep = jnp.ones((batch, height * width), bool)
        return self.attention(tokens, key_mask=keep, q_positions=positions, k_positions=positions).reshape(x.shape)


class SwinBlock(nnx.Module):
    """``x + attention(LN(x))`` then ``x + MLP(LN(x))`` on a ``[batch, H, W, C]`` map: the encoder's pre-norm
    residual blocks (:class:`rfa.models.blocks.Residual`) around (shifted) window or global attention."""

    def __init__(
        self, config: EncoderConfig, stage: SwinStage, size: tuple[int, int], window: int, shift: int, *, rngs: nnx.Rngs
    ):
        self.attention = (
            WindowAttention(
                config.d_model, config.num_heads, window, shift, size, dtype=jnp.dtype(config.dtype), rngs=rngs
            )
            if stage.windowed
            else GlobalAttention(config, rngs=rngs)
        )
        self.mlp = MLP(config, rngs=rngs)
        self.attention_residual = Residual(config, rngs=rngs)
        self.mlp_residual = Residual(config, rngs=rngs)

    def __call__(self, x: Array) -> Array:
        return self.mlp_residual(self.attention_residual(x, self.attention), self.mlp)


class PatchMerging(nnx.Module):
    """2×2 neighbouring tokens concatenated (4C), normalized and projected to 2C: the map's sides halve."""

    def __init__(self, width: int, *, dtype, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(4 * width, dtype=dtype, rngs=rngs)
        self.reduce = nnx.Linear(4 * width, 2 * width, use_bias=False, dtype=dtype, rngs=rngs)

    def __call__(self, x: Array) -> Array:
        x = jnp.concatenate([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], axis=-1)
        return self.reduce(self.norm(x))


class SwinTransformer(nnx.Module):
    """``images [batch, H, W, C]`` (floats) → class logits ``[batch, num_classes]`` (at least float32).

    Example:
      >>> config = SwinConfig(image_size=(8, 8), patch_size=1, window_size=4)
      >>> model = SwinTransformer(config, rngs=nnx.Rngs(0))
      >>> nnx.jit(SwinTransformer.__call__)(model, jnp.zeros((2, 8, 8, 1))).shape  # model(images), compiled
      (2, 10)
    """

    def __init__(self, config: SwinConfig, *, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        p, rows, columns = config.patch_size, *config.stage_sizes()[0]
        self.embed = nnx.Linear(p * p * config.channels, config.embed_dim, dtype=dtype, rngs=rngs)
        self.embed_norm = nnx.LayerNorm(config.embed_dim, dtype=dtype, rngs=rngs)
        self.positions = (
            PositionalEmbedding(
                rows * columns,
                config.embed_dim,
                kind="learned",
                init=nnx.initializers.truncated_normal(0.02),
                rngs=rngs,
            )
            if config.absolute_positions
            else None
        )
        self.dropout = nnx.Dropout(config.dropout_rate, rngs=rngs)
        blocks, merges = [], []
        for i, (stage, size) in enumerate(zip(config.stages, config.stage_sizes(), strict=True)):
            stage_config = config.stage_config(i)
            window = config.window(*size)
            shift = window // 2 if window < min(size) else 0
            blocks.append(
                nnx.List(
                    [
                        SwinBlock(stage_config, stage, size, window, shift if j % 2 else 0, rngs=rngs)
                        for j in range(stage.depth)
                    ]
                )
            )
            if i + 1 < len(config.stages):
                merges.append(PatchMerging(stage_config.d_model, dtype=dtype, rngs=rngs))
        self.stages, self.merges = nnx.List(blocks), nnx.List(merges)
        width = config.embed_dim * 2 ** (len(config.stages) - 1)
        self.norm = nnx.LayerNorm(width, dtype=dtype, rngs=rngs)
        self.head = nnx.Linear(width, config.num_classes, rngs=rngs)

    def __call__(self, images: Array) -> Array:
        c = self.config
        check_images(images, c)
        rows, columns = c.stage_sizes()[0]
        x = self.embed_norm(self.embed(patches(images, c.patch_size))).reshape(images.shape[0], rows, columns, -1)
        if self.positions is not None:
            x = x + self.positions().reshape(rows, columns, -1).astype(x.dtype)
        x = self.dropout(x)
        for i, blocks in enumerate(self.stages):
            for block in blocks:
                x = block(x)
            if i < len(self.merges):
                x = self.merges[i](x)
        return at_least_float32(self.head(self.norm(x).mean(axis=(1, 2))))
