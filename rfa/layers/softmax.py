"""Exact softmax attention and Fourier integral attention between a site's projections (the kinds ``"softmax"`` and
``"fourier"``): quadratic, with the keys and values so far as the decoding cache."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import computation_dtype
from rfa._validation import InputError
from rfa.attention.fourier_integral import fourier_integral_attention
from rfa.attention.segments import same_sequence
from rfa.checks import check_finite, raise_if
from rfa.layers.kinds import AttentionKind, SiteWidths, attention_kind, register_attention_kind, register_variant
from rfa.layers.multi_head import HeadsOptions, projected
from rfa.layers.positional import RelativeBias

Array = jax.Array


def softmax_attention(q, k, v, *, bias=None, mask=None) -> Array:
    """``softmax(QKᵀ/√d + bias) V`` of ``q [batch, q_len, heads, d]`` over ``k, v [batch, kv_len, heads, d]``, ``mask``
    (True = attend) and ``bias`` broadcastable to ``[batch, heads, q_len, kv_len]``, in the values' dtype.

    As ``jax.nn.dot_product_attention``'s XLA path: logits and softmax in float32 from the inputs' dtype, the
    probabilities cast to the values' dtype. Unlike it, float64 inputs stay float64 (its logits are float32) and a
    query that sees no key gets 0, not a uniform average over all keys.
    """
    if q.dtype == jnp.float16 and jax.default_backend() == "cpu":
        # XLA:CPU rejects float16 dots asked for float32 results under jit; float32 copies give the same products.
        q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    check_finite(q=q, k=k, v=v)
    return _attend(q, k, v, bias, mask).astype(v.dtype)


def _attend(q, k, v, bias, mask) -> Array:
    """:func:`softmax_attention` without its checks, in the computation dtype of ``k`` (float32, float64)."""
    dtype = computation_dtype(k)
    logits = jnp.einsum("bqhd,blhd->bhql", q.astype(k.dtype), k, preferred_element_type=dtype)
    logits = logits / jnp.sqrt(q.shape[-1]).astype(dtype)
    if bias is not None:
        logits = logits + bias
    if mask is not None:  # jax.nn's finite stand-in for -inf: a bias added to it cannot overflow
        logits = jnp.where(mask, logits, -0.7 * jnp.finfo(dtype).max)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bhql,blhd->bqhd", probs, v, preferred_element_type=dtype)
    if mask is None:
        return out
    sees_a_key = jnp.any(jnp.broadcast_to(mask, mask.shape[:2] + (q.shape[1], k.shape[1])), axis=-1)
    return jnp.where(jnp.moveaxis(sees_a_key, 1, 2)[..., None], out, 0.0)


def attend_one(q: Array, k: Array, v: Array, mask: Array, bias: Array | None) -> Array:
    """The decoding step's :func:`softmax_attention`, unchecked (a check would read the whole cache each token), one
    query per batch row: ``q [b, h, d]``, ``k, v [b, L, h, d]``, ``mask [b, L]``, ``bias [b, h, L]`` or None;
    ``[b, h, d]`` in the computation dtype of the cache (float32, float64)."""
    bias = None if bias is None else bias[:, :, None, :]
    return _attend(q[:, None], k, v, bias, mask[:, None, None, :])[:, 0]


def check_slot(position, slots: int, what: str) -> None:
    """A decoding step's ``position`` (an integer scalar) in ``[0, slots)``, ``what`` naming the limit: eagerly
    now, under ``jit`` when the program runs (:func:`rfa.models.decoding.generate`'s loop turns it off: its
    positions are its own). A cache written past its last slot would overwrite that slot with no error."""
    if jnp.ndim(position) != 0 or not jnp.issubdtype(jnp.result_type(position), jnp.integer):
        raise InputError(f"position must be an integer scalar, got {position!r}.")
    raise_if(
        (position < 0) | (position >= slots),
        lambda p: f"position {p} is outside {what} [0, {slots}).",
        values=(jnp.asarray(position),),
    )


def write(cache: dict, start: Array | int, k: Array, v: Array, keep: Array) -> dict:
    """The exact cache with ``k, v [batch, n, heads, d]`` and ``keep [batch, n]`` written from slot ``start`` on.

    Keys and values take the cache's dtype (the model's).
    """
    return {
        "k": jax.lax.dynamic_update_slice_in_dim(cache["k"], k.astype(cache["k"].dtype), start, axis=1),
        "v": jax.lax.dynamic_update_slice_in_dim(cache["v"], v.astype(cache["v"].dtype), start, axis=1),
        "mask": jax.lax.dynamic_update_slice_in_dim(cache["mask"], keep, start, axis=1),
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoftmaxOptions(HeadsOptions):
    """Exact softmax attention's options: the heads' (:class:`~rfa.layers.multi_head.HeadsOptions`).

    Example:
      >>> SoftmaxOptions(num_heads=4, num_kv_heads=2).num_kv_heads
      2
    """


class SoftmaxCore(nnx.Module):
    """Exact softmax attention; decoding keeps the keys and values so far (in the model's dtype)."""

    def __init__(self, widths: SiteWidths, options: HeadsOptions, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        self.causal, self.dtype = causal, jnp.dtype(widths.dtype)
        self.num_heads, self.head_dim = widths.num_heads, widths.head_dim
        relative = widths.positional == "relative" and not cross
        self.relative = (
            RelativeBias(
                widths.num_heads,
                num_buckets=widths.relative_buckets,
                max_distance=widths.relative_max_distance,
                bidirectional=not causal,
                rngs=rngs,
            )
            if relative
            else None
        )

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions, segment_ids=None) -> Array:
        mask = key_mask[:, None, None, :]
        if self.causal:
            mask = mask & (k_positions[:, None, None, :] <= q_positions[:, None, :, None])
        if segment_ids is not None:  # packed sequences: a query sees the keys of its own
            mask = mask & same_sequence(segment_ids)
        bias = None if self.relative is None else self.relative(q_positions, k_positions)
        return self.attend(q, k, v, mask, bias)

    def attend(self, q, k, v, mask, bias) -> Array:
        """The attention of ``q [batch, q_len, heads, d]`` over ``k, v [batch, kv_len, heads, d]`` with ``mask``
        broadcastable to ``[batch, heads, q_len, kv_len]`` and an optional additive ``bias``."""
        return softmax_attention(q, k, v, bias=bias, mask=mask)

    def attend_one(self, q, k, v, mask, bias) -> Array:
        """One query per batch row, ``q [batch, heads, d]``, over the cached ``k, v`` with ``mask [batch, L]``."""
        return attend_one(q, k, v, mask, bias)

    def init_cache(self, batch: int, max_length: int) -> dict:
        shape = (batch, max_length, self.num_heads, self.head_dim)
        return {
            "k": jnp.zeros(shape, self.dtype),
            "v": jnp.zeros(shape, self.dtype),
            "mask": jnp.zeros((batch, max_length), jnp.bool_),
        }

    def prefill(self, q, k, v, x, *, key_mask, positions, max_length):
        out = self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions)
        return out, write(self.init_cache(q.shape[0], max_length), 0, k, v, key_mask)

    def decode(self, q, k, v, x, cache, *, position, keep):
        check_slot(position, cache["k"].shape[1], "the cache's slots")
        cache = write(cache, position, k, v, keep[:, None])
        key_positions = jnp.broadcast_to(jnp.arange(cache["k"].shape[1]), cache["mask"].shape)
        mask = cache["mask"] & (key_positions <= position)
        positions = jnp.broadcast_to(position, q.shape[:1])[:, None]
        bias = None if self.relative is None else self.relative(positions, key_positions)[:, :, 0]
        return self.attend_one(q[:, 0], cache["k"], cache["v"], mask, bias).astype(q.dtype), cache

    def prepare_memory(self, k, v, key_mask):
        return {"k": k.astype(self.dtype), "v": v.astype(self.dtype), "mask": key_mask}

    def attend_memory(self, q, prepared):
        return self.attend_one(q[:, 0], prepared["k"], prepared["v"], prepared["mask"], None).astype(q.dtype)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FourierOptions(HeadsOptions):
    """Fourier integral attention's options: the heads' and the radius.

    Attributes:
      radius: R > 0 of the Fourier integral estimator, one for every head.

    Example:
      >>> FourierOptions(radius=2.0).radius
      2.0
    """

    radius: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.radius, bool) or not isinstance(self.radius, (int, float)) or not self.radius > 0:
            raise InputError(f"FourierOptions.radius must be a number > 0, got {self.radius!r}.")

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        super().check_site(site, widths, causal=causal, stateful=stateful)
        if widths.positional == "relative":
            raise InputError(
                f"{site}: Fourier integral attention takes no relative bias; use rotary or absolute positions."
            )


class FourierCore(SoftmaxCore):
    """Fourier integral attention (:func:`rfa.attention.fourier_integral_attention`; Nguyen et al., "FourierFormer",
    NeurIPS 2022): quadratic like exact attention, with the same KV cache for decoding.

    The radius R is :attr:`FourierOptions.radius`, fixed, one for every head.
    """

    def __init__(self, widths: SiteWidths, options: FourierOptions, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        super().__init__(widths, options, causal=causal, cross=cross, rngs=rngs)
        self.radius = float(options.radius)

    def attend(self, q, k, v, mask, bias) -> Array:
        return fourier_integral_attention(q, k, v, radius=self.radius, mask=mask)

    def attend_one(self, q, k, v, mask, bias) -> Array:
        return fourier_integral_attention(q[:, None], k, v, radius=self.radius, mask=mask[:, None, None, :])[:, 0]


register_attention_kind(
    AttentionKind(
        "softmax",
        SoftmaxOptions,
        projected(SoftmaxCore),
        causal=True,
        bidirectional=True,
        cross=True,
        cache="length",
        dense_masks=True,
        summary="exact softmax attention (Vaswani et al. 2017): a KV cache, any mask, an optional relative bias",
    )
)
register_attention_kind(
    dataclasses.replace(
        attention_kind("softmax"),
        name="fourier",
        options=FourierOptions,
        layer=projected(FourierCore),
        summary="Fourier integral attention (Nguyen et al., NeurIPS 2022): quadratic, a KV cache",
    )
)
register_variant("exact", "softmax")
