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


def log_gerf_coordinate_moment(k, a, z):
    """``log E_w[exp(k(2a w² + √(1-4a) z w))]`` for one coordinate w ~ N(0, 1), by quadrature: a GERF-family
    feature product ``Y`` of one vector factorizes over the coordinates of w, so ``log E[Y^k]`` is a sum of these
    (plus the constant factors). Infinite where ``1 - 4ka ≤ 0``."""
    import scipy.integrate

    def integrand(w):
        return np.exp(k * (2 * a * w * w + np.sqrt(1 - 4 * a) * z * w) - w * w / 2) / np.sqrt(2 * np.pi)

    return np.log(scipy.integrate.quad(integrand, -np.inf, np.inf)[0])


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


def derf(x, W, A, query_transform=None, key_transform=None, *, side="query"):
    """DERF features of ``x̃ = Tx`` (T of the side):
    ``m^{-1/2} Π(1-4a_l)^{1/4} exp(Σ a_l w_l² + Σ √(1-4a_l) w_l x̃_l - |x̃|²/2)``.

    ``A`` is one value or one per coordinate (``[d]``); the transforms are ``[d, d]`` (Likhosherstov et
    al., "Dense-Exponential Random Features", arXiv 2302.00787).
    """
    T = query_transform if side == "query" else key_transform
    x = x if T is None else x @ _f64(T).T
    m, d = W.shape
    a = np.broadcast_to(_f64(A), (d,))
    return np.prod((1 - 4 * a) ** 0.25) / np.sqrt(m) * np.exp((W * W) @ a + (x * np.sqrt(1 - 4 * a)) @ W.T - _sq(x) / 2)


def _derf_statistics(x, y):
    return x.T @ x / len(x), y.T @ y / len(y), x.mean(0), y.mean(0)


def _oprf_on(Tq, Tk, x, y):
    """OPRF's A for the transformed sets, with the transforms."""
    xt, yt = x @ Tq.T, y @ Tk.T
    rho_sum = np.mean(np.sum(xt * xt, -1)) + np.mean(np.sum(yt * yt, -1)) + 2 * xt.mean(0) @ yt.mean(0)
    return {"A": np.array([optimal_gerf_parameter(rho_sum, x.shape[-1])]), "query_transform": Tq, "key_transform": Tk}


def aderf_fit(x, y):
    """ADERF from ``x [n, d]``, ``y [n', d]``: OPRF on ``(Mx, M⁻ᵀy)`` with ``M = C^{1/4} M₁^{-1/2}``,
    ``C = M₁^{1/2} M₂ M₁^{1/2}`` (scipy's sqrtm), so that ``MᵀM = K = M₁^{-1/2} C^{1/2} M₁^{-1/2}``."""
    from scipy.linalg import inv, sqrtm

    x, y = _f64(x), _f64(y)
    M1, M2, _, _ = _derf_statistics(x, y)
    root = np.real(sqrtm(M1))
    M = np.real(sqrtm(sqrtm(root @ M2 @ root))) @ inv(root)
    return _oprf_on(M, inv(M).T, x, y)


def saderf_fit(x, y):
    """SADERF: ``Ψ_ll = (Σ y_l²/n' / Σ x_l²/n)^{1/4}``, OPRF on ``(Ψx, Ψ⁻¹y)``."""
    x, y = _f64(x), _f64(y)
    psi = (np.mean(y * y, 0) / np.mean(x * x, 0)) ** 0.25
    return _oprf_on(np.diag(psi), np.diag(1 / psi), x, y)


def sderf_fit(x, y):
    """SDERF: the eigenvectors V of ``E(x + y)(x + y)ᵀ`` over pairs, OPRF's A per eigenvalue, ``T = Vᵀ``
    (each eigenvector with its largest entry positive, as rfa documents)."""
    x, y = _f64(x), _f64(y)
    M1, M2, mx, my = _derf_statistics(x, y)
    values, vectors = np.linalg.eigh(M1 + M2 + np.outer(mx, my) + np.outer(my, mx))
    for column in vectors.T:  # each eigenvector signed so that its largest-magnitude entry is positive
        column *= np.sign(column[np.argmax(np.abs(column))])
    A = optimal_gerf_parameter(np.maximum(values, 0), 1)
    return {"A": A, "query_transform": vectors.T, "key_transform": vectors.T}


DERF_FITS = {"aderf": aderf_fit, "saderf": saderf_fit, "sderf": sderf_fit}


def hedgehog(x, W, weight, bias):
    """``[softmax(xW' + b), softmax(-(xW' + b))]`` with ``W' [d, d']`` (Zhang et al., "The Hedgehog & the
    Porcupine", ICLR 2024)."""
    z = x @ _f64(weight) + _f64(bias)

    def softmax(t):
        e = np.exp(t - t.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return np.concatenate([softmax(z), softmax(-z)], -1)


def rfa_estimate(x, y, W, sigma, key_log_weight=0.0):
    """Gated RFA's ``φ(x)ᵀφ(y) (1 - g_y)``: random Fourier features of ``σ ⊙ x/|x|`` (Peng et al., "Random
    Feature Attention", ICLR 2021), each key weighted by ``exp(key_log_weight)``; ``[Lx, Ly]``."""

    def phi(x):
        z = _f64(sigma) * x / np.linalg.norm(x, axis=-1, keepdims=True)
        return gaussian_trig(z, W)

    return phi(x) @ phi(y).T * np.exp(_f64(key_log_weight))[None, :]


def taylor_estimate(x, y, W=None):
    """``1 + xᵀy + (xᵀy)²/2``, the 2nd-order Taylor expansion of ``exp(xᵀy)`` (Arora et al. 2024, "Based")."""
    t = x @ y.T
    return 1 + t + t * t / 2


def derf_estimate(x, y, W, **params):
    """``φ_q(x)ᵀφ_k(y)`` of a DERF, ``[Lx, Ly]``."""
    return derf(x, W, **params) @ derf(y, W, **params, side="key").T


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
    "hedgehog": hedgehog,
}


def hybrid_estimate(x, y, W, angular):
    """HRF's estimate matrix ``λ̂ SM̂₊₊ + (1 - λ̂) SM̂_trig``, ``[Lx, Ly]``, from its definition (not its features).

    ``λ̂ = ½ - sgn(Rx)ᵀsgn(Ry)/(2n)``; both bases share W (Choromanski et al., "Hybrid Random Features", ICLR 2022).
    """
    angular = _f64(angular)
    lam = 0.5 - np.sign(x @ angular.T) @ np.sign(y @ angular.T).T / (2 * angular.shape[0])
    return lam * (positive(x, W) @ positive(y, W).T) + (1 - lam) * (trig(x, W) @ trig(y, W).T)


# Estimators defined by their estimate (or by a pair of maps), not by one map:
ESTIMATE_MATRICES = {
    "hybrid": hybrid_estimate,
    "rfa": rfa_estimate,
    "taylor": taylor_estimate,
    **{name: derf_estimate for name in DERF_FITS},
}
NOT_TEMPERATURE_SCALED = {"elu", "rfa", "hedgehog"}  # every other map sees q d^{-1/4} and k d^{-1/4} in attention
# Per-head parameters of the reference's attention: the axes of one head's value.
PARAM_EVENT_NDIMS = {"query_transform": 2, "key_transform": 2, "sigma": 1, "key_log_weight": 1, "weight": 2, "bias": 1}


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


def kernelized_attention(
    q,
    k,
    v,
    name,
    W=None,
    *,
    keep_k=None,
    keep_q=None,
    causal=False,
    renormalize=True,
    log_decay=None,
    relative_bias=None,
    **params,
):
    """``D⁻¹ (φ(Q) φ(K)ᵀ ⊙ Γ ⊙ mask) V`` with the Lq × Lk matrix formed, in float64.

    With ``log_decay`` g ``[B, L, H]`` (causal), ``Γ_ij = Π_{j<t<=i} exp(g_t)``, the product over the
    kept tokens after key j up to query i (Peng et al., "Random Feature Attention", ICLR 2021, Eq. 7:
    ``S_t = exp(g_t) S_{t-1} + φ(k_t)v_tᵀ``; a padded token is skipped, its decay too). With g ``[B, L, H, F]``,
    one decay per feature (Yang et al., "Gated Linear Attention Transformers", ICML 2024:
    ``S_t = diag(exp(g_t)) S_{t-1} + φ(k_t)v_tᵀ``), entry (i, j) is ``Σ_f φ(q_i)_f φ(k_j)_f Π_{j<t<=i} exp(g_tf)``.
    With ``relative_bias``
    b ``[H, 2L − 1]``, entry ``(i, j)`` is also multiplied by ``exp(b[h, L − 1 + i − j])`` (Luo et al., NeurIPS 2021).

    Args:
      q, k, v: ``[B, Lq, H, d]``, ``[B, Lk, H, d]``, ``[B, Lk, H, dv]``.
      name: feature map; q and k are scaled by ``d^{-1/4}`` unless it is elu.
      keep_k, keep_q: ``[B, L]`` bool (None: all); padded queries output 0.
      causal: ``mask[i, j] = j <= i``.
      params: map parameters; ``A``, ``phi_sq``, DERF's transforms, rfa's ``sigma`` and
        ``key_log_weight`` (``[Lk]`` per row and head) and Hedgehog's ``weight`` and ``bias`` may be arrays
        whose leading axes broadcast to ``[B, H]`` (then one value, ``[d]`` or ``[d, d]`` per row and head). oprf
        without ``phi_sq`` uses :func:`oprf_statistic` of the kept tokens, a DERF without ``A`` its fit
        to the kept tokens of each row and head (with query padding = key padding when Lq == Lk and
        no ``keep_q`` is given, as rfa documents).

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
    per_head = {n: _f64(params.pop(n)) for n in ("A", "phi_sq", *PARAM_EVENT_NDIMS) if n in params}

    def head_params(b, h):  # the map's parameters of batch row b, head h
        if name in DERF_FITS and not per_head:  # fitted from the kept tokens of this row and head
            query_keep = keep_q if keep_q is not None else (keep_k if Lq == Lk else np.ones((B, Lq), bool))
            return DERF_FITS[name](q[b, np.asarray(query_keep[b], bool), h], k[b, keep_k[b], h])
        event = {**PARAM_EVENT_NDIMS, "A": 1 if name in DERF_FITS else 0}
        return {
            **params,
            **{n: np.broadcast_to(p, (B, H) + p.shape[p.ndim - event.get(n, 0) :])[b, h] for n, p in per_head.items()},
        }

    def matrix(b, h):  # [Lq, Lk] kernel estimates
        x, y, p = q[b, :, h], k[b, :, h], head_params(b, h)
        if name in ESTIMATE_MATRICES:
            return ESTIMATE_MATRICES[name](x, y, _f64(W), **p)
        return features(name, x, W, **p) @ features(name, y, W, **p).T

    a = np.stack([np.stack([matrix(b, h) for h in range(H)]) for b in range(B)])
    allowed = np.broadcast_to(keep_k[:, None, None, :], a.shape)
    if causal:
        allowed = allowed & np.tril(np.ones((Lq, Lk), bool))
    if keep_q is not None:
        allowed = allowed & np.asarray(keep_q, bool)[:, None, :, None]
    between = np.tril(np.ones((Lq, Lk)))[:, :, None] * np.tril(np.ones((Lk, Lk)), -1)[None]  # [i, t, j]: j<t<=i
    if log_decay is not None and np.ndim(log_decay) == 4:  # one decay per feature: Σ_f φ_if φ_jf Π exp(g_tf)
        g = np.where(keep_k[:, :, None, None], _f64(log_decay), 0.0)  # [B, L, H, F]
        gamma = np.exp(np.einsum("itj,bthf->bhijf", between, g))
        a = np.stack(
            [
                np.stack(
                    [
                        np.einsum(
                            "if,jf,ijf->ij",
                            features(name, q[b, :, h], W, **head_params(b, h)),
                            features(name, k[b, :, h], W, **head_params(b, h)),
                            gamma[b, h],
                        )
                        for h in range(H)
                    ]
                )
                for b in range(B)
            ]
        )
    a = np.where(allowed, a, 0.0)
    if log_decay is not None and np.ndim(log_decay) == 3:
        g = np.where(keep_k[:, :, None], _f64(log_decay), 0.0)  # [B, L, H]
        a = a * np.exp(np.einsum("itj,bth->bhij", between, g))
    if relative_bias is not None:
        b = np.broadcast_to(_f64(relative_bias), (H, 2 * Lq - 1))
        for i in range(Lq):
            for j in range(Lk):
                a[:, :, i, j] *= np.exp(b[:, Lq - 1 + i - j])
    num = np.einsum("bhqk,bkhd->bqhd", a, v)
    if not renormalize:
        return num
    den = np.sum(a, -1).transpose(0, 2, 1)[..., None]
    return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)


def softmax_attention(q, k, v, *, keep_k=None, keep_q=None, causal=False, allowed_pairs=None, bias=None):
    """``softmax(QKᵀ/√d + B + mask) V`` in float64; a query with no kept key outputs 0. ``allowed_pairs [Lq, Lk]``:
    which keys each query may attend to, besides the other masks; ``bias`` B: added to the logits, broadcast to
    ``[B, H, Lq, Lk]`` (e.g. ``[H, Lq, Lk]``, a bias per head and pair)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if bias is not None:
        logits = logits + _f64(bias)
    allowed = np.ones(logits.shape, bool)
    if keep_k is not None:
        allowed = allowed & np.asarray(keep_k, bool)[:, None, None, :]
    if keep_q is not None:
        allowed = allowed & np.asarray(keep_q, bool)[:, None, :, None]
    if causal:
        allowed = allowed & np.tril(np.ones(logits.shape[-2:], bool))
    if allowed_pairs is not None:
        allowed = allowed & np.asarray(allowed_pairs, bool)
    logits = np.where(allowed, logits, -np.inf)
    top = np.max(logits, -1, keepdims=True)
    weights = np.where(allowed, np.exp(logits - np.where(np.isfinite(top), top, 0)), 0.0)
    den = weights.sum(-1, keepdims=True)
    weights = np.where(den > 0, weights / np.where(den > 0, den, 1), 0.0)
    return np.einsum("bhqk,bkhd->bqhd", weights, v)


def fourier_integral_attention(q, k, v, radius, *, keep_k=None, causal=False):
    """``Σ_j w_ij v_j / Σ_j w_ij`` with ``w_ij = Π_l sin(R(q_il − k_jl)) / (q_il − k_jl)`` (R at 0), float64.

    Nguyen et al., "FourierFormer", NeurIPS 2022. ``radius`` is a scalar or one value per head ``[H]``. The
    weights are the plain product (R^d kept); a query whose weights sum to exactly 0 outputs 0.
    """
    q, k, v = _f64(q), _f64(k), _f64(v)
    H = q.shape[2]
    R = np.broadcast_to(_f64(radius), (H,))
    diff = q[:, :, None, :, :] - k[:, None, :, :, :]  # [B, Lq, Lk, H, d]
    Rd = R[:, None] * diff
    factors = np.where(diff == 0, R[:, None], np.sin(Rd) / np.where(diff == 0, 1.0, diff))
    w = np.prod(factors, axis=-1).transpose(0, 3, 1, 2)  # [B, H, Lq, Lk]
    allowed = np.ones(w.shape, bool)
    if keep_k is not None:
        allowed = allowed & np.asarray(keep_k, bool)[:, None, None, :]
    if causal:
        allowed = allowed & np.tril(np.ones(w.shape[-2:], bool))
    w = np.where(allowed, w, 0.0)
    num = np.einsum("bhqk,bkhd->bqhd", w, v)
    den = np.sum(w, -1).transpose(0, 2, 1)[..., None]
    return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)


def directional_derivative(f, args, index, direction, eps=1e-5):
    """``d/dε f(args with args[index] + ε·direction)`` at 0 by central differences, in float64."""
    plus, minus = list(args), list(args)
    plus[index] = _f64(args[index]) + eps * direction
    minus[index] = _f64(args[index]) - eps * direction
    return (f(*plus) - f(*minus)) / (2 * eps)


def delta_rule(q, k, v, beta, log_decay=None, state=None):
    """The gated delta rule ``S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t−1} + β_t k_t v_tᵀ``, ``o_t = S_tᵀ q_t`` token by
    token in float64: the state decays first, then the erase reads it (Schlag et al., ICML 2021; Yang, Kautz,
    Hatamizadeh, ICLR 2025; Kimi Team, "Kimi Linear", 2025, Eq. 1); ``q, k [B, L, H, d_k]``, ``v [B, L, H, d_v]``,
    ``beta [B, L, H]``, ``log_decay [B, L, H]`` (one per token: α_t all alike) or ``[B, L, H, d_k]`` (one per key
    channel), ``state [B, H, d_k, d_v]``. Returns ``(out, state)``."""
    q, k, v, beta = _f64(q), _f64(k), _f64(v), _f64(beta)
    B, L, H, d_k = q.shape
    S = np.zeros((B, H, d_k, v.shape[-1])) if state is None else _f64(state).copy()
    alpha = np.ones((B, L, H, d_k)) if log_decay is None else np.exp(_f64(log_decay))
    alpha = np.broadcast_to(alpha if alpha.ndim == 4 else alpha[..., None], (B, L, H, d_k))
    out = np.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            for t in range(L):
                k_t = k[b, t, h][:, None]
                decayed = np.diag(alpha[b, t, h]) @ S[b, h]
                erased = (np.eye(d_k) - beta[b, t, h] * k_t @ k_t.T) @ decayed
                S[b, h] = erased + beta[b, t, h] * k_t @ v[b, t, h][None, :]
                out[b, t, h] = S[b, h].T @ q[b, t, h]
    return out, S


def _layer_norm(x, norm, eps=1e-6):
    """Flax's LayerNorm (ε = 1e-6) of ``x [..., d]`` with ``norm``'s scale and bias, in float64."""
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * _f64(norm.scale[...]) + _f64(norm.bias[...])


def _dense(x, layer):
    """``x W + b`` of an ``nnx.Linear`` or ``nnx.LinearGeneral`` (its kernel's first axis contracted)."""
    kernel = _f64(layer.kernel[...])
    out = np.tensordot(x, kernel.reshape(kernel.shape[0], -1), axes=1).reshape(x.shape[:-1] + kernel.shape[1:])
    return out + _f64(layer.bias[...])


def _gelu(x):
    """GELU, tanh approximation (``jax.nn.gelu``'s default)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def pre_norm_encoder(stack, x):
    """A pre-norm Transformer encoder (Xiong et al., ICML 2020) with exact multi-head attention and a GELU MLP, in
    float64 from the parameters of an rfa ``EncoderStack``: per layer ``x + Attn(LN(x))`` then ``x + MLP(LN(x))``,
    then a final LayerNorm; ``x [batch, L, d]``, no padding."""
    x = _f64(x)
    for layer in stack.layers:
        site, h = layer.attention, _layer_norm(x, layer.attention_residual.norm)
        q, k, v = _dense(h, site.query), _dense(h, site.key), _dense(h, site.value)  # [batch, L, heads, d_h]
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        o = np.einsum("bhqk,bkhd->bqhd", weights / weights.sum(-1, keepdims=True), v)
        x = x + np.tensordot(o, _f64(site.out.kernel[...]), axes=2) + _f64(site.out.bias[...])
        h = _layer_norm(x, layer.mlp_residual.norm)
        x = x + _dense(_gelu(_dense(h, layer.mlp.hidden)), layer.mlp.output)
    return _layer_norm(x, stack.final_norm)
