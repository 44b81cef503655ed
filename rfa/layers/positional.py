"""Positional encodings: sinusoidal, learned absolute, learned relative (bucketed bias) and rotary.

:class:`PositionalEmbedding` is the one absolute-position table of every model (text, ViT, Swin,
forecaster): learned or fixed sinusoids, along a sequence or on a 2-D grid of patches.

- sinusoidal: ``PE(p, 2i) = sin(p / 10000^{2i/d})``, ``PE(p, 2i+1) = cos(...)`` added to the token
  embeddings (Vaswani et al., "Attention Is All You Need", NeurIPS 2017, Sec. 3.5);
- learned absolute: a trained ``[max_length, d]`` table added to the embeddings;
- relative: a trained scalar per head and log-spaced bucket of the offset ``j - i`` added to the
  attention logits (Raffel et al., T5, JMLR 2020). It needs the explicit logits, so only exact
  softmax attention can use it;
- rotary: q and k rotated in 2-d planes by angles proportional to their positions, so that
  ``qᵀk`` depends on positions only through ``i - j`` (Su et al., "RoFormer", 2021). Applied to q and
  k before any feature map, it works with kernelized attention too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rfa._dtypes import computation_dtype
from rfa._validation import InputError

Array = jax.Array


def sinusoidal_table(length: int, dim: int) -> np.ndarray:
    """``[length, dim]`` float32 table of the paper's sinusoids (dim even or odd).

    Example:
      >>> sinusoidal_table(4, 8).shape
      (4, 8)
    """
    position = np.arange(length, dtype=np.float64)[:, None]
    rate = np.exp(-np.log(10000.0) * np.arange(0, dim, 2, dtype=np.float64) / dim)
    table = np.zeros((length, dim))
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)[:, : dim // 2]
    return table.astype(np.float32)


def sinusoidal_grid(rows: int, columns: int, dim: int) -> np.ndarray:
    """``[rows·columns, dim]`` 2-D sinusoids: ``[PE_row(dim/2), PE_column(dim/2)]`` of each cell, raster order."""
    row = sinusoidal_table(rows, dim // 2)
    column = sinusoidal_table(columns, dim // 2)
    return np.concatenate([np.repeat(row, columns, axis=0), np.tile(column, (rows, 1))], axis=-1)


POSITIONAL_KINDS = ("sinusoidal", "learned")
LEARNED_INIT = nnx.initializers.normal(0.02)  # ViT's and BERT's


class PositionalEmbedding(nnx.Module):
    """An absolute position table ``[leading + positions, dim]``, added to the token (or patch) embeddings.

    ``"sinusoidal"``: the paper's fixed sinusoids along a sequence, or with ``grid=(rows, columns)`` the 2-D
    sinusoids of a grid of patches (half of ``dim`` for the row, half for the column; ViT); ``"learned"``: a
    trained table drawn from ``init``. ``leading`` positions come first, before the sequence or grid (a class
    token): learned like the others, zero in a fixed table.

    Args:
      num_positions: the positions of the sequence (ignored with ``grid``: ``rows·columns``).
      dim: the embedding width (divisible by 4 for a sinusoidal grid).
      kind: ``"sinusoidal"`` or ``"learned"``.
      grid: ``(rows, columns)`` of a 2-D sinusoidal table, or None.
      leading: positions before the sequence.
      init: the learned table's initializer.
      rngs: draws the learned table.

    Example:
      >>> table = PositionalEmbedding(4, 8, kind="sinusoidal", grid=(2, 2), leading=1)
      >>> table().shape, float(jnp.abs(table()[0]).max())
      ((5, 8), 0.0)
    """

    def __init__(
        self,
        num_positions: int,
        dim: int,
        *,
        kind: str,
        grid: tuple[int, int] | None = None,
        leading: int = 0,
        init=LEARNED_INIT,
        rngs: nnx.Rngs | None = None,
    ):
        if kind not in POSITIONAL_KINDS:
            raise InputError(f"positions must be one of {list(POSITIONAL_KINDS)}, got {kind!r}.")
        count = leading + (num_positions if grid is None else grid[0] * grid[1])
        if kind == "learned":
            if rngs is None:
                raise InputError("a learned position table needs rngs to draw it.")
            self.table = nnx.Param(init(rngs.params(), (count, dim)))
        else:
            table = sinusoidal_table(num_positions, dim) if grid is None else sinusoidal_grid(*grid, dim)
            self.table = nnx.Cache(jnp.asarray(np.concatenate([np.zeros((leading, dim), np.float32), table])))

    def __call__(self, positions: Array | None = None) -> Array:
        """The rows at integer ``positions`` (any shape), or the whole table ``[count, dim]``."""
        table = self.table[...]
        return table if positions is None else table[positions]


def rotate(x: Array, positions: Array, *, base: float = 10000.0, fraction: float = 1.0) -> Array:
    """Rotary position embedding of ``x [batch, length, heads, d]`` at integer ``positions [batch, length]``.

    Pairs ``(x_i, x_{i + r/2})`` of the first ``r = int(d · fraction)`` channels are rotated by
    ``positions · base^{-2i/r}`` (Su et al., RoFormer, 2021: base 10000; long-context models raise it, Qwen3-Next's
    layers use 10⁷); the other ``d - r`` pass unrotated (partial rotary: Qwen3.5's and Qwen3-Next's
    ``partial_rotary_factor``, 0.25).

    Example:
      >>> rotate(jnp.ones((1, 3, 2, 8)), jnp.arange(3)[None]).shape
      (1, 3, 2, 8)
      >>> bool(jnp.all(rotate(jnp.ones((1, 3, 2, 8)), jnp.arange(3)[None], fraction=0.5)[..., 4:] == 1))
      True
    """
    rotated = int(x.shape[-1] * fraction)
    if rotated < x.shape[-1]:
        return jnp.concatenate([rotate(x[..., :rotated], positions, base=base), x[..., rotated:]], axis=-1)
    half = x.shape[-1] // 2
    dtype = computation_dtype(x)  # float32, float64 for float64 x
    rate = base ** (-jnp.arange(half, dtype=dtype) / half)
    angle = positions[..., None, None].astype(dtype) * rate  # [batch, length, 1, half]
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., :half].astype(dtype), x[..., half:].astype(dtype)
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)


def relative_bucket(offset: Array, *, num_buckets: int, max_distance: int, bidirectional: bool) -> Array:
    """T5's bucket of the offset ``key position - query position``: exact for small, log-spaced for large."""
    buckets = jnp.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        buckets = jnp.where(offset > 0, num_buckets, 0)
        distance = jnp.abs(offset)
    else:
        distance = jnp.maximum(-offset, 0)
    exact = num_buckets // 2
    log_bucket = exact + (
        jnp.log(jnp.maximum(distance, 1) / exact) / np.log(max_distance / exact) * (num_buckets - exact)
    ).astype(offset.dtype)
    log_bucket = jnp.minimum(log_bucket, num_buckets - 1)
    return buckets + jnp.where(distance < exact, distance, log_bucket)


class RelativeBias(nnx.Module):
    """Learned relative-position bias ``[batch, heads, q_len, kv_len]`` for the attention logits."""

    def __init__(self, num_heads: int, *, num_buckets: int, max_distance: int, bidirectional: bool, rngs: nnx.Rngs):
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.embedding = nnx.Embed(num_buckets, num_heads, rngs=rngs)

    def __call__(self, q_positions: Array, k_positions: Array) -> Array:
        offset = k_positions[:, None, :] - q_positions[:, :, None]  # [batch, q, k]
        bucket = relative_bucket(
            offset, num_buckets=self.num_buckets, max_distance=self.max_distance, bidirectional=self.bidirectional
        )
        return jnp.moveaxis(self.embedding(bucket), -1, 1)  # [batch, heads, q, k]

    def by_lag(self, length: int) -> Array:
        """The bias of every relative position of a sequence of ``length``: ``[heads, 2 length − 1]``, entry
        ``length − 1 + (i − j)`` for query i and key j (``rfa.kernelized_attention``'s ``relative_bias``)."""
        offset = length - 1 - jnp.arange(2 * length - 1)  # key minus query position, j − i
        bucket = relative_bucket(
            offset, num_buckets=self.num_buckets, max_distance=self.max_distance, bidirectional=self.bidirectional
        )
        return self.embedding(bucket).T
