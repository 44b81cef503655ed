"""Random projections ``W`` whose rows ``w_1..w_m`` drive the random feature maps.

Three couplings of the rows, all with each row marginally N(0, I_d) under "chi" scaling, so every
estimator stays unbiased:

- ``"iid"``: independent standard Gaussian rows.
- ``"orthogonal"``: blocks of ``d`` mutually orthogonal directions, the rows of a Haar-random
  orthogonal matrix R (Q of the QR decomposition of a Gaussian matrix, sign-fixed), with
  independent chi(d) norms (Yu et al., "Orthogonal Random Features", NeurIPS 2016; Choromanski
  et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.4 and Thm. 2).
- ``"simplex"``: blocks ``diag(ρ) S R`` whose ``d`` directions point to the vertices of a regular
  simplex, ``s_iᵀs_j = -1/(d-1)`` for ``i ≠ j``, rotated by a Haar-random R, with independent
  chi(d) norms ρ (Reid, Choromanski, Likhosherstov, Weller, "Simplex Random Features", ICML 2023).
  The rows of one block sum to 0 (before the norms), which cancels the term of the estimators
  that is linear in the rows; SimRF has the lowest MSE for positive features among such
  weight-independent couplings.

For m > d the blocks are independent (a new R and new norms each) and the first m rows are kept.
``scaling="sqrt_d"`` fixes every norm to sqrt(d) instead (the regularized variant).

Each kind is a :class:`ProjectionKind` in :data:`PROJECTION_KINDS`, the table ``sample_projection`` reads;
:func:`register_projection_kind` adds one (the how-to "Your own projection kind" adds quasi-Monte-Carlo rows).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from rfa._validation import (
    InputError,
    InputTypeError,
    check_choice,
    check_key,
    check_positive_int,
    renamed_keywords,
)
from rfa.random_features.lapack import per_matrix

ROW_SCALINGS = ("chi", "sqrt_d")


@dataclasses.dataclass(frozen=True)
class ProjectionKind:
    """How the rows of W are drawn, before the scaling sets their norms.

    Attributes:
      name: the ``projection_kind`` of :func:`sample_projection`.
      rows: ``rows(key, num_features, dim) -> [num_features, dim]`` float32, traceable under ``jit``.
      gaussian: True when each row is marginally N(0, I_d) (its norm chi(d)): ``"chi"`` keeps the rows as they
        are and ``"sqrt_d"`` rescales them; False when the rows are unit directions, which either scaling
        multiplies by its norms.
    """

    name: str
    rows: Callable[[jax.Array, int, int], jax.Array]
    gaussian: bool


PROJECTION_KINDS: dict[str, ProjectionKind] = {}


def register_projection_kind(name: str, rows: Callable[[jax.Array, int, int], jax.Array], *, gaussian: bool):
    """Adds a projection kind: ``sample_projection(..., projection_kind=name)`` and the layers' ``projection_kind``
    (their option ``rfa.layers.MapOptions.projection_kind`` too) then accept it. Every estimator stays unbiased when
    each row is marginally N(0, I_d) under ``"chi"`` (``gaussian=True`` rows, or unit directions uniform on the sphere).
    Closed-form MSEs (``rfa.theory``) stay those of the kinds each estimator lists.

    Example:
      >>> rfa.random_features.projections.register_projection_kind(
      ...     "iid_antithetic", lambda key, m, d: jnp.concatenate(
      ...         [rows := jax.random.normal(key, (-(-m // 2), d)), -rows])[:m], gaussian=True)
      >>> W = rfa.sample_projection(jax.random.key(0), 4, 3, projection_kind="iid_antithetic")
      >>> bool(jnp.allclose(W[0], -W[2]))
      True
    """
    if name in PROJECTION_KINDS:
        raise InputError(f"projection kind {name!r} is already registered.")
    PROJECTION_KINDS[name] = ProjectionKind(name, rows, gaussian)


def _haar_rotations(key: jax.Array, num_blocks: int, dim: int) -> jax.Array:
    """``[num_blocks, dim, dim]`` independent Haar-random orthogonal matrices (their rows are orthonormal)."""
    gaussian = jax.random.normal(key, (num_blocks, dim, dim), jnp.float32)
    q, r = per_matrix(jnp.linalg.qr, gaussian)
    # Multiplying column i of Q by sign(R_ii) makes Q Haar-distributed (Mezzadri 2007).
    q = q * jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return jnp.swapaxes(q, -1, -2)


@functools.lru_cache(maxsize=32)
def simplex_vertices(dim: int) -> np.ndarray:
    """``S [dim, dim]``: unit rows with ``s_iᵀs_j = -1/(d-1)`` for ``i ≠ j``, the vertices of a regular simplex.

    With ``u = (1, …, 1, 0)``: ``s_i = √(d/(d-1)) e_i - ((√d + 1)/(d-1)^{3/2}) u`` for ``i < d`` and
    ``s_d = u/√(d-1)`` (Reid et al., "Simplex Random Features", ICML 2023). The rows sum to 0.

    Example:
      >>> S = simplex_vertices(3)
      >>> np.round(S @ S.T, 6).tolist()
      [[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]]
    """
    if dim < 2:
        raise InputError(f"simplex directions need dim >= 2 (d - 1 >= 1 dimensions to span), got dim={dim}.")
    u = np.ones(dim)
    u[-1] = 0.0
    vertices = math.sqrt(dim / (dim - 1)) * np.eye(dim) - (math.sqrt(dim) + 1) / (dim - 1) ** 1.5 * u
    vertices[-1] = u / math.sqrt(dim - 1)
    return vertices


def _check_dtype(dtype):
    if not jnp.issubdtype(dtype, jnp.floating):
        raise InputTypeError(f"dtype must be a floating dtype, got {dtype}.")


def _iid_rows(key, num_features: int, dim: int) -> jax.Array:
    return jax.random.normal(key, (num_features, dim), jnp.float32)


def _block_rows(directions: Callable[[int], jax.Array] | None):
    """Rows of independent blocks of ``d`` unit directions, each block a Haar-random rotation of ``directions(d)``
    (None: the identity, i.e. orthonormal rows)."""

    def rows(key, num_features: int, dim: int) -> jax.Array:
        blocks = _haar_rotations(key, math.ceil(num_features / dim), dim)
        if directions is not None:
            blocks = jnp.asarray(directions(dim), jnp.float32) @ blocks
        return blocks.reshape(-1, dim)[:num_features]

    return rows


register_projection_kind("orthogonal", _block_rows(None), gaussian=False)
register_projection_kind("iid", _iid_rows, gaussian=True)
register_projection_kind("simplex", _block_rows(simplex_vertices), gaussian=False)


@functools.partial(jax.jit, static_argnames=("num_features", "dim", "kind", "scaling", "dtype"))
def _sample(key, num_features, dim, kind, scaling, dtype):
    direction_key, norm_key = jax.random.split(key)
    projection_kind = PROJECTION_KINDS[kind]
    rows = projection_kind.rows(direction_key, num_features, dim)
    if projection_kind.gaussian:
        if scaling == "chi":
            return rows.astype(dtype)
        rows = rows / jnp.linalg.norm(rows, axis=-1, keepdims=True)
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
    projection_kind: str = "orthogonal",
    scaling: str = "chi",
    dtype=jnp.float32,
) -> jax.Array:
    """Samples the random projection ``W`` of shape ``[num_features, dim]``.

    Args:
      key: a PRNG key. A redraw is a new key: split one, never derive it from data.
      num_features: m, the number of random vectors (rows of W). May exceed ``dim``: orthogonal
        and simplex rows are then stacked from ``ceil(m / dim)`` independent blocks.
      dim: d, the dimension of the inputs the features are computed from (>= 2 for simplex).
      projection_kind: ``"orthogonal"`` (block-orthogonal rows), ``"simplex"`` (block-simplex rows), ``"iid"``
        (independent rows), or a kind added by :func:`register_projection_kind`; see the module docstring.
        (``kind=``, its name before rfa 0.3, works until 0.4.)
      scaling: row norms; ``"chi"`` makes every row marginally N(0, I_d) (unbiased estimators),
        ``"sqrt_d"`` fixes every norm to sqrt(d).
      dtype: floating dtype of the result; sampling runs in float32.

    Returns:
      ``W`` with shape ``[num_features, dim]``.

    Example:
      >>> W = sample_projection(jax.random.key(0), 256, 64)
      >>> W.shape
      (256, 64)
      >>> S = sample_projection(jax.random.key(0), 4, 4, projection_kind="simplex", scaling="sqrt_d")
      >>> round(float(S[0] @ S[1]), 4)  # d · (-1/(d-1))
      -1.3333
    """
    check_key(key)
    num_features = check_positive_int(num_features, "num_features")
    dim = check_positive_int(dim, "dim")
    check_choice(projection_kind, "projection_kind", PROJECTION_KINDS)
    check_choice(scaling, "scaling", ROW_SCALINGS)
    _check_dtype(dtype)
    if projection_kind == "simplex" and dim < 2:
        raise InputError(
            f"projection_kind='simplex' needs dim >= 2 (a simplex of d directions spans d - 1 dimensions), "
            f"got dim={dim}."
        )
    return _sample(key, num_features, dim, projection_kind, scaling, jnp.dtype(dtype))


sample_projection = renamed_keywords(kind="projection_kind")(sample_projection)


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
