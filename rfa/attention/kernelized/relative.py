"""The relative-bias mode: kernelized attention with a learned bias per relative position, by FFT.

Luo, Zheng, Ke, Wang, Sun, Liu, "Stable, Fast and Accurate: Kernelized Attention with Relative Positional
Encoding", NeurIPS 2021. Query i weighs key j by ``exp(b_{i−j}) φ(q_i)ᵀφ(k_j)``, so with ``c_n = exp(b_n)``

``out_i = φ(q_i)ᵀ Σ_j c_{i−j} φ(k_j)[v_j, 1]ᵀ / (the same with 1)``:

for every feature f and value column e, ``T_i = Σ_j c_{i−j} φ(k_j)_f [v_j, 1]_e`` is a Toeplitz matrix times a
vector, a linear convolution of the keys' outer products with ``c``. From :data:`FFT_FROM_LENGTH` tokens it is
computed by zero-padding to ``N >= 2L − 1`` and FFTs along the length: O(L log L · F · (d_v + 1)) time and
O(L · F · (d_v + 1)) memory per row (the convolved outer products are formed; no L × L matrix). Shorter
sequences form the L × L weights ``φ(q_i)ᵀφ(k_j) c_{i−j}`` instead: F·(d_v + 1) FFTs of a few hundred points
cost more than that on XLA (at L = 40, 60x more on this project's CPU). Causal: ``c_n = 0`` for ``n < 0``.

Stability: ``c = exp(b − max b)`` and the keys' features at one reference per row (as the bidirectional
mode), so no term exceeds 1; both factors cancel in the normalized output. **Round-off** (the FFT form): an FFT
convolution in float32 has an absolute error of about 1e-7·log N times the largest sum ``T``, not
relative to each entry: a query whose sums are small next to other queries' — keys it sees through a
bias far below ``max b``, or few keys while others see many — loses that ratio in relative accuracy
(a bias spread of 10 nats costs about 4 digits). Keep ``b`` moderate, or use exact attention with a bias.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from rfa.attention.chunk_scores import contract
from rfa.attention.common import with_ones_column
from rfa.attention.kernelized.bidirectional import key_reference
from rfa.attention.kernelized.prepare import Call, merge_rows, output, rows
from rfa.attention.state import RecurrentState
from rfa.random_features.feature_maps import features_at

Array = jax.Array


FFT_FROM_LENGTH = 512
"""The length from which the Toeplitz sums run by FFT; shorter sequences form the L × L weights
``φ(q_i)ᵀφ(k_j) c_{i−j}``, which cost fewer operations there (``rfa.experiments.benchmarks.relative``)."""


def toeplitz(kernel: Array, length: int) -> Array:
    """The matrices ``C_ij = c_{i−j}`` ``[rows, L, L]`` of ``kernel [rows, 2L−1]`` (``c_n`` at ``L − 1 + n``)."""
    lags = jnp.arange(length)[:, None] - jnp.arange(length)[None, :]
    return kernel[:, length - 1 + lags]


def toeplitz_sums(kernel: Array, x: Array) -> Array:
    """``T_i = Σ_j c_{i−j} x_j`` for ``i, j < L`` by FFT: ``kernel [rows, 2L−1]`` holds ``c_n`` at ``L − 1 + n``,
    ``x [rows, L, ...]``; returns ``[rows, L, ...]``.

    The full linear convolution of ``kernel`` and ``x`` holds ``T_i`` at index ``i + L − 1``; a circular one of
    size ``N >= 2L − 1`` agrees with it there, since what wraps around lands at index ``3L − 3 − N`` or below.
    """
    length = x.shape[1]
    size = 1 << (2 * length - 2).bit_length()  # a power of two >= 2L - 1
    spectrum = jnp.fft.rfft(kernel, size, axis=1).reshape(kernel.shape[:1] + (-1,) + (1,) * (x.ndim - 2))
    full = jnp.fft.irfft(spectrum * jnp.fft.rfft(x, size, axis=1), size, axis=1)
    return full[:, length - 1 : 2 * length - 1]


@functools.partial(jax.jit, static_argnames="causal")
def relative(call: Call, *, causal: bool) -> tuple[Array, RecurrentState]:
    """The relative-bias mode, bidirectional or ``causal``: ``(output [batch..., L, heads, d_v], no state)``."""
    fm, r = call.fm, rows(call, causal=causal)
    length = r.q.shape[-2]
    phi_q, s_q = fm.split(r.q, call.projection, **r.params)
    base_k, log_k = fm.terms(r.k, call.projection, side="key", **r.params)
    key_ref = key_reference(log_k, r.key_log_mask)  # the bidirectional mode's: no key's features overflow
    phi_k = features_at(base_k, log_k, key_ref - r.key_log_mask)
    bias = merge_rows(call.relative_bias, r.shape, 1)  # [rows, 2L - 1]
    bias_max = jax.lax.stop_gradient(jnp.max(bias, axis=-1, keepdims=True))
    kernel = jnp.exp(bias - bias_max)
    if causal:  # c_n = 0 for n < 0: entries before L - 1
        kernel = jnp.where(jnp.arange(2 * length - 1) >= length - 1, kernel, 0.0)
    v_aug = with_ones_column(r.v)
    if length < FFT_FROM_LENGTH:  # the L × L weights: fewer operations than F·(dv+1) FFTs at these lengths
        weights = contract("...qf,...kf->...qk", phi_q, phi_k, **call.contraction) * toeplitz(kernel, length)
        num_aug = contract("...qk,...kd->...qd", weights, v_aug, **call.contraction)
    else:
        sums = toeplitz_sums(kernel, phi_k[..., :, None] * v_aug[..., None, :])  # of the [rows, L, F, dv+1] products
        num_aug = contract("...qf,...qfd->...qd", phi_q, sums, **call.contraction)
    out = output(call, num_aug, key_ref[..., 0] + bias_max, s_q[..., 0], r.shape)
    return out, None
