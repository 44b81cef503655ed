"""The state of causal kernelized attention, shared by every mode.

After t tokens the state is ``S_t = exp(g_t) S_{t-1} + φ(k_t)[v_t, 1]ᵀ`` (``[F, d_v + 1]``; the last
column is the normalizer ``z_t``, ``g_t`` the log-decay, 0 without one), and the output of a query
is ``φ(q_t)ᵀS_t[:, :d_v] / φ(q_t)ᵀz_t`` (Katharopoulos et al., "Transformers are RNNs", ICML 2020,
Sec. 3.4; with decay, Yang et al., "Gated Linear Attention Transformers with Hardware-Efficient
Training", ICML 2024). It is stored as ``S = kv · exp(log_reference)``: ``kv`` stays in float32
range however large the features or however strong the decay, the scale lives in the log.

Every mode takes and returns this one layout (``initial_state=``, ``return_state=True``): a state from
a prompt's chunked pass continues in :func:`rfa.attention.recurrent_attention` token by token, and
from there in another chunked pass.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, InputTypeError, check_positive_int

Array = jax.Array

LOWEST = float(jnp.finfo(jnp.float32).min)  # the reference of the empty state: exp(LOWEST - s) = 0


class RecurrentState(NamedTuple):
    """The state ``S = kv · exp(log_reference)`` of kernelized attention.

    Attributes:
      kv: ``[batch..., heads, F, d_v + 1]``, float32 (float64 for float64 inputs):
        ``Σ_j exp(s_j + G_t - G_j - R) φ̃(k_j) [v_j, 1]ᵀ`` (``s_j`` the key's log-scale, ``G`` the cumulative
        log-decay).
      log_reference: ``[batch..., heads]``, as kv's dtype, R: the log of the state's scale.
    """

    kv: Array
    log_reference: Array

    def value(self) -> Array:
        """``S = kv · exp(log_reference)``, ``[batch..., heads, F, d_v + 1]`` (may overflow where the log is large)."""
        return self.kv * jnp.exp(self.log_reference)[..., None, None]


def init_state(
    batch_shape: tuple[int, ...], num_heads: int, num_outputs: int, value_dim: int, dtype=jnp.float32
) -> RecurrentState:
    """The empty state (no token seen yet).

    Args:
      batch_shape: leading batch dims, e.g. ``(batch,)`` or ``()``.
      num_heads: heads.
      num_outputs: F, the feature-map output length,
        ``rfa.estimator(name).num_outputs(num_features, head_dim)``.
      value_dim: d_v.
      dtype: the state's dtype, float32 (float64 for a float64 computation; a lower one is raised to float32).

    Returns:
      A :class:`RecurrentState` of zeros, with the reference at the lowest float32.

    Example:
      >>> state = rfa.attention.init_state((2,), 8, 256, 64)
      >>> state.kv.shape
      (2, 8, 256, 65)
    """
    if not isinstance(batch_shape, tuple | list) or not all(isinstance(b, int) and b >= 1 for b in batch_shape):
        raise InputError(f"batch_shape must be a tuple of ints >= 1, got {batch_shape!r}.")
    num_heads = check_positive_int(num_heads, "num_heads")
    num_outputs = check_positive_int(num_outputs, "num_outputs")
    value_dim = check_positive_int(value_dim, "value_dim")
    batch_shape = tuple(batch_shape)
    dtype = computation_dtype(dtype)
    return RecurrentState(
        kv=jnp.zeros(batch_shape + (num_heads, num_outputs, value_dim + 1), dtype),
        log_reference=jnp.full(batch_shape + (num_heads,), LOWEST, dtype),
    )


def check_state(state, batch_heads: tuple[int, ...], value_dim: int) -> RecurrentState:
    """Checks ``initial_state`` against the call's ``[batch..., heads]`` and ``d_v`` (F is checked by the caller)."""
    if not isinstance(state, RecurrentState):
        raise InputTypeError(
            f"initial_state must be a rfa.attention.RecurrentState (from return_state=True or init_state), "
            f"got {type(state).__name__}."
        )
    kv_shape, ref_shape = tuple(jnp.shape(state.kv)), tuple(jnp.shape(state.log_reference))
    if len(kv_shape) != len(batch_heads) + 2 or kv_shape[:-2] != batch_heads or kv_shape[-1] != value_dim + 1:
        raise InputError(
            f"initial_state.kv must have shape [batch..., heads, F, d_v + 1] = {batch_heads} + (F, {value_dim + 1}) "
            f"for these q, k, v, got {kv_shape}."
        )
    if ref_shape != batch_heads:
        raise InputError(
            f"initial_state.log_reference must have shape [batch..., heads] = {batch_heads}, got {ref_shape}."
        )
    kv, log_reference = jnp.asarray(state.kv), jnp.asarray(state.log_reference)
    return RecurrentState(kv.astype(computation_dtype(kv)), log_reference.astype(computation_dtype(log_reference)))
