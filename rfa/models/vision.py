"""The Vision Transformer: an image cut into patches, each patch a token of the encoder stack.

Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale",
ICLR 2021: non-overlapping ``p × p`` patches, flattened and linearly embedded (a convolution with
kernel and stride ``p`` is the same map), plus position embeddings (learned, or fixed 2-D
sinusoids: half of the width encodes the patch's row, half its column), an optional class token,
the Transformer encoder (pre-norm, GELU) with the attention chosen by ``encoder_attention`` (exact or
kernelized, as in every rfa model), and a linear head on the class token or on the mean of the patches.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import at_least_float32
from rfa._validation import InputError, InputTypeError
from rfa.layers.positional import PositionalEmbedding
from rfa.models.config import EncoderConfig
from rfa.models.site import Site
from rfa.models.transformer import EncoderStack

Array = jax.Array

PATCH_EMBEDDINGS = ("linear", "conv")
VISION_POSITIONS = ("learned", "sinusoidal")
VISION_POOLINGS = ("cls", "mean")


def check_patching(config) -> tuple[int, int]:
    """A vision config's ``(height, width)``, checked to be tiled by its ``patch_size`` (else a ValueError)."""
    name = type(config).__name__
    size = tuple(config.image_size)
    if len(size) != 2 or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in size):
        raise InputError(f"{name}.image_size must be (height, width) of positive ints, got {config.image_size!r}.")
    if isinstance(config.patch_size, bool) or not isinstance(config.patch_size, int) or config.patch_size < 1:
        raise InputError(f"{name}.patch_size must be a positive int, got {config.patch_size!r}.")
    if size[0] % config.patch_size or size[1] % config.patch_size:
        raise InputError(
            f"image_size {size[0]}x{size[1]} is not divisible by patch_size = {config.patch_size}: the patches must "
            "tile the image (pick a patch size that divides both sides, or resize the images)."
        )
    return size


def check_images(images, config) -> None:
    """``images`` must be floating ``[batch, height, width, channels]`` of the vision config (else an error)."""
    expected = (*config.image_size, config.channels)
    if getattr(images, "ndim", None) != 4 or tuple(images.shape[1:]) != expected:
        raise InputError(
            f"images must have shape [batch, {expected[0]}, {expected[1]}, {expected[2]}] ({type(config).__name__}."
            f"image_size and channels), got {tuple(getattr(images, 'shape', ()))}."
        )
    if not jnp.issubdtype(images.dtype, jnp.floating):
        raise InputTypeError(f"images must be floating point (e.g. pixels / 255), got {images.dtype}.")


@dataclasses.dataclass(frozen=True)
class VisionConfig:
    """A Vision Transformer's image, patches, widths and attention.

    Attributes:
      image_size: ``(height, width)`` in pixels; each must be divisible by ``patch_size``.
      patch_size: side of the square patches, in pixels.
      channels: colour channels of the images.
      num_classes: classes of the head.
      d_model, num_heads, mlp_dim, num_layers: the encoder's widths and depth.
      dropout_rate: on the patch embeddings and sub-layer outputs.
      patch_embedding: ``"linear"`` (a Dense layer on flattened patches) or ``"conv"`` (kernel = stride =
        patch_size): the same family of maps.
      positional: ``"learned"`` or ``"sinusoidal"`` (2-D; ``d_model`` divisible by 4).
      pooling: ``"cls"`` (a learned class token) or ``"mean"`` over the patches.
      attention: the encoder's self-attention (an rfa.models.Site: exact or any kind that runs bidirectionally).
      dtype: computation dtype; parameters are float32.

    Example:
      >>> config = VisionConfig(image_size=(8, 8), patch_size=2, d_model=32, num_heads=4, mlp_dim=64, num_layers=2)
      >>> config.num_patches
      16
    """

    image_size: tuple[int, int]
    patch_size: int
    channels: int = 1
    num_classes: int = 10
    d_model: int = 64
    num_heads: int = 4
    mlp_dim: int = 128
    num_layers: int = 2
    dropout_rate: float = 0.0
    patch_embedding: str = "linear"
    positional: str = "learned"
    pooling: str = "cls"
    attention: Site = dataclasses.field(default_factory=Site)
    dtype: str = "float32"

    def __post_init__(self):
        size = check_patching(self)
        for name, allowed in (
            ("patch_embedding", PATCH_EMBEDDINGS),
            ("positional", VISION_POSITIONS),
            ("pooling", VISION_POOLINGS),
        ):
            if getattr(self, name) not in allowed:
                raise InputError(f"VisionConfig.{name} must be one of {list(allowed)}, got {getattr(self, name)!r}.")
        if self.positional == "sinusoidal" and self.d_model % 4:
            raise InputError(f"2-D sinusoidal positions need d_model divisible by 4, got {self.d_model}.")
        object.__setattr__(self, "image_size", size)
        self.encoder_config()  # checks the widths and the attention

    @property
    def grid(self) -> tuple[int, int]:
        """Patches per column and per row."""
        return self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def num_tokens(self) -> int:
        return self.num_patches + (self.pooling == "cls")

    def encoder_config(self) -> EncoderConfig:
        """The encoder stack's config (pre-norm, GELU; patches are embedded, not looked up)."""
        return EncoderConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            mlp_dim=self.mlp_dim,
            num_encoder_layers=self.num_layers,
            dropout_rate=self.dropout_rate,
            activation="gelu",
            norm="pre",
            max_length=self.num_tokens,
            encoder_attention=self.attention,
            dtype=self.dtype,
        )


def patches(images: Array, patch_size: int) -> Array:
    """``[batch, H, W, C]`` → ``[batch, (H/p)(W/p), p·p·C]``: patches in raster order, each flattened row by row.

    Example:
      >>> patches(jnp.arange(16.0).reshape(1, 4, 4, 1), 2)[0, 1]  # the top-right patch
      Array([2., 3., 6., 7.], dtype=float32)
    """
    batch, height, width, channels = images.shape
    p = patch_size
    x = images.reshape(batch, height // p, p, width // p, p, channels)
    return jnp.swapaxes(x, 2, 3).reshape(batch, (height // p) * (width // p), p * p * channels)


class VisionTransformer(nnx.Module):
    """``images [batch, H, W, C]`` (floats, e.g. in [0, 1]) → class logits ``[batch, num_classes]`` (at least float32).

    Example:
      >>> config = VisionConfig(image_size=(8, 8), patch_size=2, d_model=32, num_heads=4, mlp_dim=64,
      ...                       attention=Site("positive", num_features=16))
      >>> model = VisionTransformer(config, rngs=nnx.Rngs(0))
      >>> nnx.jit(VisionTransformer.__call__)(model, jnp.zeros((3, 8, 8, 1))).shape  # model(images), compiled
      (3, 10)
    """

    def __init__(self, config: VisionConfig, *, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        p, d = config.patch_size, config.d_model
        if config.patch_embedding == "conv":
            self.embed = nnx.Conv(
                config.channels, d, kernel_size=(p, p), strides=(p, p), padding="VALID", dtype=dtype, rngs=rngs
            )
        else:
            self.embed = nnx.Linear(p * p * config.channels, d, dtype=dtype, rngs=rngs)
        # The class token sits at no patch: a position of its own, before the grid.
        self.positions = PositionalEmbedding(
            config.num_patches,
            d,
            kind=config.positional,
            grid=config.grid,
            leading=int(config.pooling == "cls"),
            rngs=rngs,
        )
        self.cls = nnx.Param(jnp.zeros((1, 1, d))) if config.pooling == "cls" else None
        self.dropout = nnx.Dropout(config.dropout_rate, rngs=rngs)
        encoder = config.encoder_config()
        self.encoder = EncoderStack(encoder, rngs=rngs)
        self.head = nnx.Linear(d, config.num_classes, rngs=rngs)

    def tokens(self, images: Array) -> Array:
        """The encoder's input ``[batch, num_tokens, d_model]``: embedded patches (and class token) plus positions."""
        c = self.config
        check_images(images, c)
        if c.patch_embedding == "conv":
            x = self.embed(images).reshape(images.shape[0], c.num_patches, c.d_model)
        else:
            x = self.embed(patches(images, c.patch_size))
        if self.cls is not None:
            x = jnp.concatenate([jnp.broadcast_to(self.cls[...].astype(x.dtype), (x.shape[0], 1, c.d_model)), x], 1)
        return self.dropout(x + self.positions().astype(x.dtype))

    def __call__(self, images: Array) -> Array:
        x = self.tokens(images)
        batch, length = x.shape[:2]
        positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
        x = self.encoder(x, key_mask=jnp.ones((batch, length), bool), positions=positions)
        pooled = x[:, 0] if self.cls is not None else x.mean(axis=1)
        return at_least_float32(self.head(pooled))
