"""Dense-exponential random features (DERF, "FAVOR#"): GERF with matrix parameters fitted to the data.

A DERF feature of ω ~ N(0, I_d) is ``f_k(ω, z) = D exp(ωᵀAω + ωᵀB_k z + zᵀC_k z)`` (k = 1 queries,
k = 2 keys), an unbiased estimator of ``exp(xᵀy)`` when ``I - 8A ≻ 0``, ``B₁ᵀ(I-4A)⁻¹B₂ = I``,
``C_k = -½ B_kᵀ(I-4A)⁻¹B_k`` and ``D = det(I-4A)^{1/4}``. Every DERF takes the form used here:
with ``A = V diag(a) Vᵀ``, ω and Vᵀω have one law (for orthogonal and simplex rows too, whose
law is rotation invariant), and ``T_k = diag(1-4a)^{-1/2} VᵀB_k`` turns the constraint into
``T₁ᵀT₂ = I``. With ``x̃ = T₁x`` (``query_transform``) and ``ỹ = T₂y`` (``key_transform``)::

    φ(x̃)_i = m^{-1/2} Π_l (1-4a_l)^{1/4} exp(Σ_l a_l w_il² + Σ_l √(1-4a_l) w_il x̃_l - |x̃|²/2),

a GERF with one A per coordinate, and ``φ(x̃)ᵀφ(ỹ)`` estimates ``exp(x̃ᵀỹ) = exp(xᵀy)``. Its variance
per random vector (``z̃ = x̃ + ỹ``) is::

    V = SM² (e^L - 1),  L = Σ_l [log(1-4a_l) - ½ log(1-8a_l) + z̃_l²/(1-8a_l)].

The three fits minimise the mean over query-key pairs of the log second moment ``log(V + SM²)``,
in closed form from ``M₁ = mean xxᵀ``, ``M₂ = mean yyᵀ`` and the means ``μ_x``, ``μ_y``
(docs/references.md, "Dense-exponential random features"):

- ``sderf`` (symmetric): ``T₁ = T₂ = Vᵀ`` and ``a_l = a*(λ_l)`` for ``VΛVᵀ = M₁ + M₂ + μ_xμ_yᵀ + μ_yμ_xᵀ``,
  the second moment of ``x + y``, and ``a*(ρ)`` OPRF's optimal A at ``ρ`` (coordinate by coordinate).
  Each eigenvector is signed so that its largest entry is positive: the estimator's law does not
  depend on the signs, its value for one W does.
- ``aderf`` (asymmetric): OPRF on ``(Mx, M⁻ᵀy)`` with ``MᵀM = K``, the ``K ≻ 0`` minimising
  ``tr(KM₁) + tr(K⁻¹M₂)``: ``K = M₁^{-1/2}C^{1/2}M₁^{-1/2}``, ``C = M₁^{1/2}M₂M₁^{1/2}``. The estimator's
  law depends on M only through K; rfa takes ``M = C^{1/4}M₁^{-1/2}`` (two eigendecompositions).
- ``saderf`` (simplified, diagonal): OPRF on ``(Ψx, Ψ⁻¹y)``, ``Ψ_ll = (M₂,ll / M₁,ll)^{1/4}``.

Nesting orders the objective: positive >= oprf >= saderf >= aderf and oprf >= sderf. When queries
and keys share one distribution, aderf and saderf fall back to oprf. Eigenvalues below 1e-6 of
the largest are raised to it (the fit of M₁⁻¹ from fewer than d vectors is otherwise undefined).
The second moments of sequences longer than 1024 tokens come from 1024 evenly strided ones (the
means from all): any parameters give an unbiased estimator, and this keeps the fit's cost a small
fraction of an attention forward pass on long sequences (the docs' implementation notes measure it).

Likhosherstov, Choromanski, Dubey, Liu, Sarlos, Weller, "Dense-Exponential Random Features: Sharp
Positive Estimators of the Gaussian Kernel", arXiv 2302.00787 (2023).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, InputTypeError, is_concrete
from rfa.random_features.closed_forms import (
    COUPLED_PROJECTIONS,
    Theory,
    coupled_log_mse,
    optimal_gerf_parameter,
    pair_stats,
)
from rfa.random_features.estimators.softmax import (
    check_gerf_parameter,
    log_variance_from_exponent,
    masked_mean,
    query_keep,
)
from rfa.random_features.feature_maps import FITTED, Estimator, Param, half_sq_norm, project, register_estimator
from rfa.random_features.lapack import per_matrix

Array = jax.Array
_HIGHEST = jax.lax.Precision.HIGHEST
EIGENVALUE_FLOOR = 1e-6  # relative to the largest eigenvalue
MOMENT_TOKENS = 1024  # the second moments of longer sequences come from this many strided tokens


def transform(T: Array, x: Array) -> Array:
    """``Tx`` for ``x [..., d]`` and ``T [..., d, d]`` whose leading axes broadcast against x's.

    T constant along x's last token axis (``[..., 1, d, d]``, as fitted per sequence) is one matmul
    per row, never broadcast to one matrix per token.
    """
    if T.ndim >= 3 and x.ndim >= 2 and T.shape[-3] == 1:
        return jnp.matmul(x, jnp.swapaxes(T[..., 0, :, :], -1, -2), precision=_HIGHEST)
    return jnp.einsum("...ij,...j->...i", T, x, precision=_HIGHEST)


def _per_coordinate(A, x: Array) -> Array:
    """A as ``[..., d]`` for ``x [..., d]``, in x's computation dtype: one value per coordinate (a scalar or a last
    axis of 1 broadcasts)."""
    dim = x.shape[-1]
    A = jnp.asarray(A, computation_dtype(x))
    A = A[None] if A.ndim == 0 else A
    return jnp.broadcast_to(A, A.shape[:-1] + (dim,))


def _transformed(x: Array, T) -> Array:
    if T is None:
        return x
    T = jnp.asarray(T, computation_dtype(x))
    if T.shape[-2:] != (x.shape[-1],) * 2:
        raise InputError(f"the DERF transforms must have shape [..., d, d] with d = {x.shape[-1]}, got {T.shape}.")
    return transform(T, x)


def _check_transforms(query_transform, key_transform) -> None:
    if (query_transform is None) != (key_transform is None):
        raise InputError(
            "pass query_transform and key_transform together (key_transform = query_transform^{-T}), or neither."
        )


def _derf_terms(side: str):
    """The query (``side="query"``) or key map: ``(None, log φ)`` of the transformed input."""

    def terms(x, W, *, A, query_transform=None, key_transform=None):
        _check_transforms(query_transform, key_transform)
        x = _transformed(x, query_transform if side == "query" else key_transform)
        m = W.shape[0]
        a = _per_coordinate(A, x)
        log_phi = (
            jnp.einsum("...l,ml->...m", a, W * W, precision=_HIGHEST)
            + project(jnp.sqrt(1.0 - 4.0 * a) * x, W)
            - half_sq_norm(x)
            + 0.25 * jnp.sum(jnp.log1p(-4.0 * a), axis=-1, keepdims=True)
            - 0.5 * math.log(m)
        )
        return None, log_phi

    return terms


# Fits: from q [..., n, d] and k [..., n', d] (as the map sees them), per leading index.


def _mm(a: Array, b: Array) -> Array:
    return jnp.matmul(a, b, precision=_HIGHEST)


def _second_moment(x: Array, keep: Array | None) -> Array:
    """``mean xxᵀ`` over the length axis of ``x [..., n, d]`` (kept rows): ``[..., d, d]``.

    From at most ``MOMENT_TOKENS`` evenly strided rows: the d × d moment costs 2·n·d² flops, 1/8 of an
    attention forward pass at m = 4d, and 1024 rows estimate it as well as the fit needs.
    """
    stride = -(-x.shape[-2] // MOMENT_TOKENS)
    if keep is not None:
        keep = jnp.broadcast_to(keep, x.shape[:-1] + (1,))[..., ::stride, :]
    x = x[..., ::stride, :]
    if keep is not None:
        x = jnp.where(keep, x, 0.0)
        count = jnp.maximum(jnp.sum(keep.astype(x.dtype), axis=-2), 1.0)[..., None]
    else:
        count = x.shape[-2]
    return jnp.einsum("...ni,...nj->...ij", x, x, precision=_HIGHEST) / count


def _statistics(q, k, keep_q, keep_k, *, full: bool):
    """``(M₁, M₂, μ_x, μ_y)`` of the queries and keys without gradient: the second moments ``[..., d, d]``,
    or only their diagonals ``[..., d]`` (``full=False``)."""
    for name, x in (("q", q), ("k", k)):
        if x.shape[-2] < 2:
            raise InputError(
                f"DERF parameters are fitted from at least 2 queries and 2 keys; {name} has {x.shape[-2]} "
                f"(shape {tuple(x.shape)}). Pass them in feature_params, fitted on more data."
            )
    q, k = jax.lax.stop_gradient(q), jax.lax.stop_gradient(k)
    keep_q = query_keep(q, k, keep_q, keep_k)
    if full:
        M1, M2 = _second_moment(q, keep_q), _second_moment(k, keep_k)
    else:
        M1, M2 = masked_mean(q * q, keep_q), masked_mean(k * k, keep_k)
    return M1, M2, masked_mean(q, keep_q), masked_mean(k, keep_k)


def _check_positive_definite(moment: Array, name: str, batch_ndim: int) -> None:
    """Raises a ValueError when a concrete second moment (or its diagonal) is zero or not finite for some
    head: no fit exists."""
    if is_concrete(moment):
        top = np.max(np.abs(np.asarray(moment, np.float64)), axis=tuple(range(batch_ndim, np.ndim(moment))))
        if not np.all(np.isfinite(top)) or np.any(top <= 0.0):
            raise InputError(
                f"the DERF fit is not positive definite: the second moment of {name} is zero or not finite "
                "for some head (all-zero or non-finite inputs)."
            )


def _floored(eigenvalues: Array) -> Array:
    top = jnp.max(eigenvalues, axis=-1, keepdims=True)
    return jnp.maximum(eigenvalues, jnp.maximum(EIGENVALUE_FLOOR * top, jnp.finfo(jnp.float32).tiny))


def _eigh(matrix: Array) -> tuple[Array, Array]:
    """Eigenvalues (floored) and eigenvectors of the symmetric part of ``matrix``."""
    values, vectors = per_matrix(jnp.linalg.eigh, 0.5 * (matrix + jnp.swapaxes(matrix, -1, -2)))
    return _floored(values), vectors


def _power(eigen: tuple[Array, Array], p: float) -> Array:
    """``V diag(λ^p) Vᵀ``."""
    values, vectors = eigen
    return _mm(vectors * values[..., None, :] ** p, jnp.swapaxes(vectors, -1, -2))


def _with_oprf_parameter(query_transform, key_transform, mean_sq) -> dict:
    """OPRF's A at ``ρ = mean |T₁x + T₂y|²/d`` over pairs (``mean_sq`` the mean), with the transforms, per token."""
    A = optimal_gerf_parameter(mean_sq, query_transform.shape[-1])
    return {
        "A": A[..., None, None],
        "query_transform": query_transform[..., None, :, :],
        "key_transform": key_transform[..., None, :, :],
    }


def _aderf_fit(q, k, keep_q=None, keep_k=None) -> dict:
    # M = C^{1/4} M₁^{-1/2} with C = M₁^{1/2} M₂ M₁^{1/2} has MᵀM = K, and M⁻ᵀ = C^{-1/4} M₁^{1/2}; then
    # tr(KM₁) = tr(K⁻¹M₂) = tr C^{1/2}, so mean |Mx + M⁻ᵀy|² = 2 tr C^{1/2} + 2 μ_xᵀμ_y.
    M1, M2, mean_q, mean_k = _statistics(q, k, keep_q, keep_k, full=True)
    _check_positive_definite(M1, "q", mean_q.ndim - 1)
    _check_positive_definite(M2, "k", mean_q.ndim - 1)
    m1 = _eigh(M1)
    root = _power(m1, 0.5)
    c = _eigh(_mm(_mm(root, M2), root))
    query_transform = _mm(_power(c, 0.25), _power(m1, -0.5))
    key_transform = _mm(_power(c, -0.25), root)
    mean_sq = 2.0 * jnp.sum(jnp.sqrt(c[0]), axis=-1) + 2.0 * jnp.sum(mean_q * mean_k, axis=-1)
    return _with_oprf_parameter(query_transform, key_transform, mean_sq)


def _saderf_fit(q, k, keep_q=None, keep_k=None) -> dict:
    # Ψ = diag((m₂/m₁)^{1/4}) from the diagonals; mean |Ψx + Ψ⁻¹y|² = 2 Σ √(m₁ m₂) + 2 μ_xᵀμ_y.
    m1, m2, mean_q, mean_k = _statistics(q, k, keep_q, keep_k, full=False)
    _check_positive_definite(m1, "q", mean_q.ndim - 1)
    _check_positive_definite(m2, "k", mean_q.ndim - 1)
    m1, m2 = _floored(m1), _floored(m2)
    psi = (m2 / m1) ** 0.25
    eye = jnp.eye(psi.shape[-1], dtype=psi.dtype)
    mean_sq = 2.0 * jnp.sum(jnp.sqrt(m1 * m2), axis=-1) + 2.0 * jnp.sum(mean_q * mean_k, axis=-1)
    return _with_oprf_parameter(psi[..., :, None] * eye, eye / psi[..., :, None], mean_sq)


def _signed(vectors: Array) -> Array:
    """Eigenvectors (columns) with the sign that makes each one's largest-magnitude entry positive.

    The estimator's law does not depend on the signs, its value for one W does: this makes the fit
    a function of the data (up to the basis of a repeated eigenvalue).
    """
    top = jnp.take_along_axis(vectors, jnp.argmax(jnp.abs(vectors), axis=-2, keepdims=True), axis=-2)
    return vectors * jnp.where(top < 0, -1.0, 1.0)


def _sderf_fit(q, k, keep_q=None, keep_k=None) -> dict:
    M1, M2, mean_q, mean_k = _statistics(q, k, keep_q, keep_k, full=True)
    cross = mean_q[..., :, None] * mean_k[..., None, :]
    values, vectors = per_matrix(jnp.linalg.eigh, M1 + M2 + cross + jnp.swapaxes(cross, -1, -2))
    vectors = _signed(vectors)
    A = optimal_gerf_parameter(jnp.maximum(values, 0.0), 1)  # ρ = λ_l, coordinate by coordinate
    rotation = jnp.swapaxes(vectors, -1, -2)[..., None, :, :]
    return {"A": A[..., None, :], "query_transform": rotation, "key_transform": rotation}


def _standard_params(dim: int) -> dict:
    # Queries and keys with independent N(0, 1) entries scaled by d^{-1/4}: every fit is OPRF's,
    # A* at E|x + y|² = 2√d, with identity transforms.
    return {"A": float(optimal_gerf_parameter(2.0 * math.sqrt(dim), dim))}


# Closed form.


def log_derf_variance(x: Array, y: Array, A, query_transform=None, key_transform=None) -> Array:
    """log V of one random vector at ``(x, y) [..., d]`` (module docstring): ``[...]``."""
    _check_transforms(query_transform, key_transform)
    x_t, y_t = _transformed(x, query_transform), _transformed(y, key_transform)
    a = _per_coordinate(A, x)
    z = x_t + y_t
    L = jnp.sum(jnp.log1p(-4.0 * a) - 0.5 * jnp.log1p(-8.0 * a) + z * z / (1.0 - 8.0 * a), axis=-1)
    return log_variance_from_exponent(jnp.sum(x_t * y_t, axis=-1), L)


_K = np.arange(1.0, 5.0)


def _derf_log_relative_moments(x, y, A=None, query_transform=None, key_transform=None) -> np.ndarray:
    """``log E[(Y/K)^k]``, k = 1..4, of one vector's estimate Y (float64 NumPy; ``inf`` where infinite).

    With ``E exp(c ω² + bω) = (1-2c)^{-1/2} exp(b²/(2(1-2c)))`` per coordinate, ``Y^k`` has
    ``c = 2k a_l`` and ``b = k √(1-4a_l) z̃_l``: ``Σ_l [k/2 log(1-4a_l) - ½ log(1-4k a_l)
    + k²(1-4a_l) z̃_l²/(2(1-4k a_l))] - k(|x̃|² + |ỹ|²)/2 - k xᵀy``.
    """
    if A is None:
        raise InputTypeError("DERF moments need the fitted parameters A (and the transforms).")
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if query_transform is not None:
        x = np.einsum("...ij,...j->...i", np.asarray(query_transform, np.float64), x)
        y = np.einsum("...ij,...j->...i", np.asarray(key_transform, np.float64), y)
    a = np.asarray(A, np.float64)
    a = np.broadcast_to(a if a.ndim else a[None], np.broadcast_shapes(np.shape(a) or (1,), x.shape))[..., None, :]
    z_sq = ((x + y) ** 2)[..., None, :]
    k = _K[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        one_minus = 1 - 4 * k * a
        per_coordinate = (
            k / 2 * np.log1p(-4 * a) - 0.5 * np.log(one_minus) + k**2 * (1 - 4 * a) * z_sq / (2 * one_minus)
        )
        log_moment = np.sum(per_coordinate, -1) - _K * (np.sum(x * x + y * y, -1) / 2 + np.sum(x * y, -1))[..., None]
    return np.where(np.all(one_minus > 0, -1), log_moment, np.inf)


def _derf_log_mse(x, y, num_features, *, projection_kind, num_terms, A=None, query_transform=None, key_transform=None):
    if A is None:
        raise InputTypeError(
            "a DERF closed form needs the fitted parameters A (and the transforms): pass "
            "**rfa.estimator(name).fit(q, k) of the queries and keys it is meant for (a single pair has no fit)."
        )
    check_gerf_parameter(A)
    log_var = log_derf_variance(x, y, A, query_transform, key_transform)
    if projection_kind == "iid":
        return log_var - math.log(num_features)
    if jnp.shape(A)[-1:] not in ((), (1,)):
        raise InputError(
            f"the closed form for projection_kind={projection_kind!r} needs one A for every coordinate "
            f"(shape [..., 1]); A has shape {jnp.shape(A)}."
        )
    s = pair_stats(_transformed(x, query_transform), _transformed(y, key_transform))
    return coupled_log_mse(log_var, s, num_features, projection_kind=projection_kind, num_terms=num_terms)


def _derf(name: str, fit, projection_kinds: tuple[str, ...]) -> Estimator:
    return Estimator(
        name,
        _derf_terms("query"),
        "softmax",
        1,
        temperature_scaled=True,
        positive=True,
        params=(
            Param("A", FITTED, required=True, per_token=True, event_ndim=1, check=check_gerf_parameter),
            Param("query_transform", FITTED, per_token=True, event_ndim=2),
            Param("key_transform", FITTED, per_token=True, event_ndim=2),
        ),
        key_terms_fn=_derf_terms("key"),
        fit=fit,
        standard_params=_standard_params,
        theory=Theory(_derf_log_mse, projection_kinds, log_relative_moments=_derf_log_relative_moments),
    )


_ALL_COUPLINGS = ("iid",) + COUPLED_PROJECTIONS

for _fm in (
    _derf("aderf", _aderf_fit, _ALL_COUPLINGS),
    _derf("saderf", _saderf_fit, _ALL_COUPLINGS),
    _derf("sderf", _sderf_fit, ("iid",)),  # one A per coordinate: coupled rows are not isotropic for it
):
    register_estimator(_fm)
