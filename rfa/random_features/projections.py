"""Random projections ``W`` whose rows ``w_1..w_m`` drive the random feature maps.

iid rows are standard Gaussian. Orthogonal rows come in independent blocks of ``d`` mutually
orthogonal directions (Q of the QR decomposition of a Gaussian matrix, sign-fixed so Q is Haar
distributed), rescaled to chi(d) norms so that each row is still marginally N(0, I_d)
("chi"), or to norm sqrt(d) (the regularized "sqrt_d" variant).

Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.4 and Thm. 2;
Yu et al., "Orthogonal Random Features", NeurIPS 2016.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from rfa._validation import check_choice, check_key, check_positive_int

PROJECTION_KINDS = ("orthogonal", "iid")
ROW_SCALINGS = ("chi", "sqrt_d")


def _orthogonal_directions(key: jax.Array, num_rows: int, dim: int) -> jax.Array:
    """``num_rows`` unit rows, orthogonal within each block of ``dim`` consecutive rows."""
    num_blocks = math.ceil(num_rows / dim)
    gaussian = jax.random.normal(key, (num_blocks, dim, dim), jnp.float32)
    q, r = jnp.linalg.qr(gaussian)
    # Multiplying column i of Q by sign(R_ii) makes Q Haar-distributed (Mezzadri 2007).
    q = q * jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    rows = jnp.swapaxes(q, -1, -2).reshape(num_blocks * dim, dim)
    return rows[:num_rows]


def _check_dtype(dtype):
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}.")


@functools.partial(jax.jit, static_argnames=("num_features", "dim", "kind", "scaling", "dtype"))
def _sample(key, num_features, dim, kind, scaling, dtype):
    direction_key, norm_key = jax.random.split(key)
    if kind == "iid":
        rows = jax.random.normal(direction_key, (num_features, dim), jnp.float32)
        if scaling == "chi":
            return rows.astype(dtype)
        rows = rows / jnp.linalg.norm(rows, axis=-1, keepdims=True)
    else:
        rows = _orthogonal_directions(direction_key, num_features, dim)
    if scaling == "chi":
        norms = jnp.linalg.norm(jax.random.normal(norm_key, (num_features, dim), jnp.float32), axis=-1)
    else:
        norms = jnp.full((num_features,), math.sqrt(dim), jnp.float32)
    return (rows * norms[:, None]).astype(dtype)


def sample_projection(
    key: jax.Array,
    num_features: int,
    dim: int,
    *,
    kind: str = "orthogonal",
    scaling: str = "chi",
    dtype=jnp.float32,
) -> jax.Array:
    """Samples the random projection ``W`` of shape ``[num_features, dim]``.

    Args:
      key: a PRNG key. A redraw is a new key: split one, never derive it from data.
      num_features: m, the number of random vectors (rows of W). May exceed ``dim``: orthogonal
        rows are then stacked from ``ceil(m / dim)`` independent blocks.
      dim: d, the dimension of the inputs the features are computed from.
      kind: ``"orthogonal"`` (block-orthogonal rows) or ``"iid"`` (independent rows).
      scaling: row norms; ``"chi"`` makes every row marginally N(0, I_d) (unbiased estimators),
        ``"sqrt_d"`` fixes every norm to sqrt(d).
      dtype: floating dtype of the result; sampling runs in float32.

    Returns:
      ``W`` with shape ``[num_features, dim]``.

    Example:
      >>> W = sample_projection(jax.random.key(0), 256, 64)
      >>> W.shape
      (256, 64)
    """
    check_key(key)
    num_features = check_positive_int(num_features, "num_features")
    dim = check_positive_int(dim, "dim")
    check_choice(kind, "kind", PROJECTION_KINDS)
    check_choice(scaling, "scaling", ROW_SCALINGS)
    _check_dtype(dtype)
    return _sample(key, num_features, dim, kind, scaling, jnp.dtype(dtype))


def sample_phases(key: jax.Array, num_features: int, *, dtype=jnp.float32) -> jax.Array:
    """Samples the phases ``b ~ U[0, 2π)`` of the random-phase cosine map, shape ``[num_features]``.

    Rahimi & Recht, "Random Features for Large-Scale Kernel Machines", NeurIPS 2007.

    Example:
      >>> b = sample_phases(jax.random.key(0), 128)
      >>> b.shape
      (128,)
    """
    check_key(key)
    num_features = check_positive_int(num_features, "num_features")
    _check_dtype(dtype)
    return jax.random.uniform(key, (num_features,), jnp.float32, 0.0, 2 * jnp.pi).astype(dtype)
