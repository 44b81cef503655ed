"""The dtype rfa computes in: float32, or float64 for float64 inputs (``jax_enable_x64``).

bfloat16 and float16 inputs are computed in float32 (their states, sums and exponents need float32's range and
digits; the bfloat16 policy casts only matmul operands down, :func:`rfa.attention.chunk_scores.contract`), and
float64 inputs in float64, so a float64 model is float64 throughout.
"""

from __future__ import annotations

import jax.numpy as jnp

from rfa._validation import InputError


def computation_dtype(*arrays) -> jnp.dtype:
    """The promoted dtype of ``arrays`` (arrays or dtypes), at least float32.

    Example:
      >>> computation_dtype(jnp.zeros(2, jnp.bfloat16)), computation_dtype(jnp.float16, jnp.float32)
      (dtype('float32'), dtype('float32'))
    """
    return jnp.promote_types(jnp.result_type(*arrays), jnp.float32)


def at_least_float32(x):
    """``x`` in :func:`computation_dtype`: a model's outputs (logits, forecasts), float32 for a bfloat16 model and
    float64 for a float64 one.

    Example:
      >>> at_least_float32(jnp.ones(2, jnp.bfloat16)).dtype
      dtype('float32')
    """
    return x.astype(computation_dtype(x))


def check_compute_dtype(compute_dtype, where: str):
    """``compute_dtype`` (the operand dtype of a chunked form's matmuls) as a dtype, or None; a non-floating one
    raises ``InputError`` naming ``where``.

    Example:
      >>> check_compute_dtype("bfloat16", "delta_rule_attention")
      dtype(bfloat16)
    """
    if compute_dtype is None:
        return None
    dtype = jnp.dtype(compute_dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise InputError(f"{where}: compute_dtype must be a floating dtype, got {dtype}.")
    return dtype


def layer_compute_dtype(dtype) -> jnp.dtype | None:
    """The matmul operand dtype of a layer computing in ``dtype``: bfloat16 or float16 for a half-precision layer
    (their sums in float32), None (the computation dtype) otherwise.

    Example:
      >>> layer_compute_dtype(jnp.bfloat16), layer_compute_dtype(jnp.float32)
      (dtype(bfloat16), None)
    """
    dtype = jnp.dtype(dtype)
    return dtype if dtype.itemsize < 4 else None
