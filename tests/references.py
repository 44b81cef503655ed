"""Independent references for the tests: NumPy, float64, written from the papers' formulas for clarity.

Nothing here calls rfa: a test that compares rfa with these functions fails when rfa's own formula
is wrong, which a comparison with rfa's own helpers cannot do. Layout as in rfa:
``x [..., d]``, ``W [m, d]``; attention ``q [B, Lq, H, d]``, ``k, v [B, Lk, H, ·]``.

Feature maps (docs/references.md, "Feature maps"): Rahimi & Recht 2007; Choromanski et al.,
"Rethinking Attention with Performers", ICLR 2021; Likhosherstov et al., "Chefs' Random Tables",
NeurIPS 2022; Katharopoulos et al., "Transformers are RNNs", ICML 2020.
"""

from __future__ import annotations

import numpy as np


def _f64(x):
    return np.asarray(x, np.float64)


def _sq(x):
    return np.sum(x * x, axis=-1, keepdims=True)


def trig(x, W):
    """``exp(|x|²/2) m^{-1/2} [cos(Wx), sin(Wx)]``."""
    wx = x @ W.T
    return np.exp(_sq(x) / 2) * np.concatenate([np.cos(wx), np.sin(wx)], -1) / np.sqrt(W.shape[0])


def positive(x, W):
    """``exp(-|x|²/2) m^{-1/2} exp(Wx)``."""
    return np.exp(x @ W.T - _sq(x) / 2) / np.sqrt(W.shape[0])


def hyperbolic(x, W):
    """``exp(-|x|²/2) (2m)^{-1/2} [exp(Wx), exp(-Wx)]``."""
    wx = x @ W.T
    return np.exp(-_sq(x) / 2) * np.concatenate([np.exp(wx), np.exp(-wx)], -1) / np.sqrt(2 * W.shape[0])


def gerf(x, W, A):
    """``(1-4A)^{d/4} m^{-1/2} exp(A|w|² + √(1-4A) wᵀx - |x|²/2)``; ``A`` broadcasts against ``x[..., :1]``."""
    A = _f64(A)
    m, d = W.shape
    return (
        (1 - 4 * A) ** (d / 4)
        / np.sqrt(m)
        * np.exp(A * np.sum(W * W, -1) + np.sqrt(1 - 4 * A) * (x @ W.T) - _sq(x) / 2)
    )


def optimal_gerf_parameter(phi_sq, d):
    """OPRF's ``A* = (1 - 2ρ - √((2ρ + 1)² + 8ρ)) / 16`` with ``ρ = |x + y|²/d`` (CRT, Thm. 4.2)."""
    rho = _f64(phi_sq) / d
    return (1 - 2 * rho - np.sqrt((2 * rho + 1) ** 2 + 8 * rho)) / 16


def oprf(x, W, phi_sq):
    return gerf(x, W, optimal_gerf_parameter(phi_sq, W.shape[1]))


def relu(x, W, epsilon=1e-3):
    return np.maximum(x @ W.T, 0) + epsilon


def elu(x, W=None):
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def gaussian_trig(x, W):
    wx = x @ W.T
    return np.concatenate([np.cos(wx), np.sin(wx)], -1) / np.sqrt(W.shape[0])


def gaussian_cosine(x, W, phases):
    return np.sqrt(2 / W.shape[0]) * np.cos(x @ W.T + _f64(phases))


FEATURE_MAPS = {
    "trig": trig,
    "positive": positive,
    "hyperbolic": hyperbolic,
    "gerf": gerf,
    "oprf": oprf,
    "relu": relu,
    "elu": elu,
    "gaussian_trig": gaussian_trig,
    "gaussian_cosine": gaussian_cosine,
}


def hybrid_estimate(x, y, W, angular):
    """HRF's estimate matrix ``λ̂ SM̂₊₊ + (1 - λ̂) SM̂_trig``, ``[Lx, Ly]``, from its definition (not its features).

    ``λ̂ = ½ - sgn(Rx)ᵀsgn(Ry)/(2n)``; both bases share W (Choromanski et al., "Hybrid Random Features", ICLR 2022).
    """
    angular = _f64(angular)
    lam = 0.5 - np.sign(x @ angular.T) @ np.sign(y @ angular.T).T / (2 * angular.shape[0])
    return lam * (positive(x, W) @ positive(y, W).T) + (1 - lam) * (trig(x, W) @ trig(y, W).T)


ESTIMATE_MATRICES = {"hybrid": hybrid_estimate}  # estimators defined by their estimate, not by one map
NOT_TEMPERATURE_SCALED = {"elu"}  # every other map sees q d^{-1/4} and k d^{-1/4} in attention


def features(name, x, W=None, **params):
    """φ(x) of the map ``name`` in float64."""
    return FEATURE_MAPS[name](_f64(x), None if W is None else _f64(W), **params)


def oprf_statistic(q, k, keep_q=None, keep_k=None):
    """``mean|q|² + mean|k|² + 2 mean(q)ᵀmean(k)`` over kept tokens, per batch and head: ``[B, H]``.

    ``q [B, Lq, H, d]``, ``k [B, Lk, H, d]`` (already temperature-scaled), ``keep_* [B, L]`` bool.
    """
    q, k = _f64(q), _f64(k)
    keep_q = np.ones(q.shape[:2], bool) if keep_q is None else np.asarray(keep_q, bool)
    keep_k = np.ones(k.shape[:2], bool) if keep_k is None else np.asarray(keep_k, bool)

    def mean(x, keep):  # x [B, L, H, n] -> [B, H, n]
        w = keep[:, :, None, None].astype(np.float64)
        return np.sum(x * w, 1) / np.maximum(np.sum(w, 1), 1)

    mean_q, mean_k = mean(q, keep_q), mean(k, keep_k)
    return (mean(_sq(q), keep_q) + mean(_sq(k), keep_k))[..., 0] + 2 * np.sum(mean_q * mean_k, -1)


def kernelized_attention(q, k, v, name, W=None, *, keep_k=None, keep_q=None, causal=False, renormalize=True,
                         **params):  # fmt: skip
    """``D⁻¹ (φ(Q) φ(K)ᵀ ⊙ mask) V`` with the Lq × Lk matrix formed, in float64.

    Args:
      q, k, v: ``[B, Lq, H, d]``, ``[B, Lk, H, d]``, ``[B, Lk, H, dv]``.
      name: feature map; q and k are scaled by ``d^{-1/4}`` unless it is elu.
      keep_k, keep_q: ``[B, L]`` bool (None: all); padded queries output 0.
      causal: ``mask[i, j] = j <= i``.
      params: map parameters; ``A`` and ``phi_sq`` may be arrays broadcastable to ``[B, H]``. oprf
        without ``phi_sq`` uses :func:`oprf_statistic` of the kept tokens (with query padding = key
        padding when Lq == Lk and no ``keep_q`` is given, as rfa documents).

    Returns:
      ``[B, Lq, H, dv]``; a query with no kept key outputs 0.
    """
    q, k, v = _f64(q), _f64(k), _f64(v)
    d = q.shape[-1]
    if name not in NOT_TEMPERATURE_SCALED:
        q, k = q * d**-0.25, k * d**-0.25
    B, Lq, H, _ = q.shape
    Lk = k.shape[1]
    keep_k = np.ones((B, Lk), bool) if keep_k is None else np.asarray(keep_k, bool)
    if name == "oprf" and "phi_sq" not in params:
        query_keep = keep_q if keep_q is not None else (keep_k if Lq == Lk else None)
        params = {**params, "phi_sq": oprf_statistic(q, k, query_keep, keep_k)}  # [B, H]
    array_params = {n: np.broadcast_to(_f64(p), (B, H)) for n, p in params.items() if n in ("A", "phi_sq")}
    params = {n: p for n, p in params.items() if n not in array_params}

    def phi(x):  # [B, L, H, d] -> [B, L, H, F], with the parameters of each batch row and head
        def one(b, h):
            return features(name, x[b, :, h], W, **params, **{n: p[b, h] for n, p in array_params.items()})

        return np.stack([np.stack([one(b, h) for h in range(H)], axis=1) for b in range(B)])

    if name in ESTIMATE_MATRICES:
        a = np.stack([np.stack([ESTIMATE_MATRICES[name](q[b, :, h], k[b, :, h], _f64(W), **params)
                                for h in range(H)]) for b in range(B)])  # fmt: skip
    else:
        a = np.einsum("bqhf,bkhf->bhqk", phi(q), phi(k))
    allowed = np.broadcast_to(keep_k[:, None, None, :], a.shape)
    if causal:
        allowed = allowed & np.tril(np.ones((Lq, Lk), bool))
    if keep_q is not None:
        allowed = allowed & np.asarray(keep_q, bool)[:, None, :, None]
    a = np.where(allowed, a, 0.0)
    num = np.einsum("bhqk,bkhd->bqhd", a, v)
    if not renormalize:
        return num
    den = np.sum(a, -1).transpose(0, 2, 1)[..., None]
    return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)


def softmax_attention(q, k, v, *, keep_k=None, keep_q=None, causal=False):
    """``softmax(QKᵀ/√d + mask) V`` in float64; a query with no kept key outputs 0."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(logits.shape, bool)
    if keep_k is not None:
        allowed = allowed & np.asarray(keep_k, bool)[:, None, None, :]
    if keep_q is not None:
        allowed = allowed & np.asarray(keep_q, bool)[:, None, :, None]
    if causal:
        allowed = allowed & np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(allowed, logits, -np.inf)
    top = np.max(logits, -1, keepdims=True)
    weights = np.where(allowed, np.exp(logits - np.where(np.isfinite(top), top, 0)), 0.0)
    den = weights.sum(-1, keepdims=True)
    weights = np.where(den > 0, weights / np.where(den > 0, den, 1), 0.0)
    return np.einsum("bhqk,bkhd->bqhd", weights, v)


def directional_derivative(f, args, index, direction, eps=1e-5):
    """``d/dε f(args with args[index] + ε·direction)`` at 0 by central differences, in float64."""
    plus, minus = list(args), list(args)
    plus[index] = _f64(args[index]) + eps * direction
    minus[index] = _f64(args[index]) - eps * direction
    return (f(*plus) - f(*minus)) / (2 * eps)
