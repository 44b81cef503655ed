"""Feature maps φ with φ(x)ᵀφ(y) ≈ k(x, y), behind a name registry.

Every map is written as ``φ(x) = base(x) ⊙ exp(log(x))``: the exponential maps have no base
and ``log`` holds their exponents, trig has ``base = [cos, sin]/√m`` and one ``log = |x|²/2`` per
row, the others (relu, elu and the Gaussian maps) have ``log = 0``. The caller picks the offset
``c`` subtracted from ``log`` before exponentiating (:func:`features_at`), and that is the
max-subtraction stabilizer: a per-row offset of the queries cancels in normalized attention and
so does a common offset of the keys, so attention divides queries by ``exp(s(q))``,
``s = max log``, and keys by ``exp`` of a reference at least as large as their ``s`` (see
:mod:`rfa.attention.kernelized`) and never overflows; the estimators form
``φ̃(x)ᵀφ̃(y) · exp(s(x) + s(y))``, which is exact. Offsets never carry gradients: the features
carry the whole derivative.

Maps (``W`` is ``[m, d]``, rows ``w_i``; see docs/references.md, "Feature maps"):

==================  ==========================================================  ========
name                φ(x)                                                        features
==================  ==========================================================  ========
trig                exp(|x|²/2) m^{-1/2} [cos(Wx), sin(Wx)]                     2m
positive            exp(-|x|²/2) m^{-1/2} exp(Wx)                               m
hyperbolic          exp(-|x|²/2) (2m)^{-1/2} [exp(Wx), exp(-Wx)]                2m
gerf (A < 1/8)      (1-4A)^{d/4} m^{-1/2} exp(A|w_i|² + √(1-4A) w_iᵀx - |x|²/2)  m
oprf                gerf at A* = optimal_gerf_parameter(phi_sq, d)              m
relu                relu(Wx) + ε                                                m
elu                 elu(x) + 1                                                  d
gaussian_trig       m^{-1/2} [cos(Wx), sin(Wx)]                                 2m
gaussian_cosine     √(2/m) cos(Wx + b)                                          m
==================  ==========================================================  ========

The softmax-kernel maps estimate ``SM(x, y) = exp(xᵀy)`` without bias; the Gaussian ones
``exp(-|x-y|²/2)``; relu and elu are deterministic baselines that estimate no kernel.

References: Rahimi & Recht, NeurIPS 2007 (trig, cosine); Choromanski et al., "Rethinking
Attention with Performers", ICLR 2021 (positive, hyperbolic, relu); Likhosherstov et al.,
"Chefs' Random Tables", NeurIPS 2022 (gerf, oprf); Katharopoulos et al., "Transformers are
RNNs", ICML 2020 (elu).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from rfa._validation import check_floating, check_positive_int, check_rank, is_concrete

Array = jax.Array
_HIGHEST = jax.lax.Precision.HIGHEST


def optimal_gerf_parameter(phi_sq, dim: int) -> Array:
    """Returns A*, the GERF parameter minimizing the variance (OPRF, FAVOR++).

    ``A* = (1/16) (1 - 2φ/d - sqrt((2φ/d + 1)² + 8φ/d))`` with ``φ = |x + y|²``; A* <= 0.
    In attention, ``φ`` is estimated as ``mean|q|² + mean|k|² + 2 mean(q)ᵀmean(k)``.

    Likhosherstov et al., "Chefs' Random Tables", NeurIPS 2022, Thm. 4.2.

    Args:
      phi_sq: ``|x + y|²``, any shape, >= 0.
      dim: d, the input dimension.

    Returns:
      A* with the shape of ``phi_sq``.

    Example:
      >>> float(optimal_gerf_parameter(0.0, 64))
      0.0
    """
    _check_phi_sq(phi_sq)
    phi_sq = jnp.asarray(phi_sq, jnp.float32)
    dim = check_positive_int(dim, "dim")
    rho = phi_sq / dim
    return (1.0 - 2.0 * rho - jnp.sqrt((2.0 * rho + 1.0) ** 2 + 8.0 * rho)) / 16.0


def _project(x: Array, W: Array) -> Array:
    return jnp.einsum("...d,md->...m", x, W, precision=_HIGHEST)


def _half_sq_norm(x: Array) -> Array:
    return 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)


def row_log_scale(log: Array) -> Array:
    """``s(x) = max log(x)`` over the features of each row, ``[..., 1]``, without gradient."""
    return jax.lax.stop_gradient(jnp.max(log, axis=-1, keepdims=True))


def features_at(base: Array | None, log: Array, offset: Array) -> Array:
    """``base ⊙ exp(log - offset)``: the features divided by ``exp(offset)`` (an offset of +inf gives 0)."""
    scaled = jnp.exp(log - offset)
    return scaled if base is None else base * scaled


def _no_log(base: Array) -> tuple[Array, Array]:
    return base, jnp.zeros(base.shape[:-1] + (1,), base.dtype)


def _trig(x, W):
    wx = _project(x, W)
    return jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(W.shape[0]), _half_sq_norm(x)


def _positive(x, W):
    return None, _project(x, W) - _half_sq_norm(x) - 0.5 * math.log(W.shape[0])


def _hyperbolic(x, W):
    wx = _project(x, W)
    return None, jnp.concatenate([wx, -wx], axis=-1) - _half_sq_norm(x) - 0.5 * math.log(2 * W.shape[0])


def _check_gerf_parameter(A):
    # Checked before conversion: inside jit a Python float is concrete, jnp.asarray(A) is not.
    if is_concrete(A) and np.any(np.asarray(A) >= 0.125):
        raise ValueError(f"A must be < 1/8 for GERF features (the variance is infinite otherwise), got {A}.")
    return jnp.asarray(A, jnp.float32)


def _check_phi_sq(phi_sq):
    if is_concrete(phi_sq) and np.any(np.asarray(phi_sq) < 0):
        raise ValueError(f"phi_sq must be >= 0 (it is |x + y|²), got min {np.min(np.asarray(phi_sq))}.")


def _gerf(x, W, *, A):
    A = jnp.asarray(A, jnp.float32)[..., None]
    m, d = W.shape
    b = jnp.sqrt(1.0 - 4.0 * A)
    log_phi = (
        A * jnp.sum(W * W, axis=-1)
        + b * _project(x, W)
        - _half_sq_norm(x)
        + 0.25 * d * jnp.log1p(-4.0 * A)
        - 0.5 * math.log(m)
    )
    return None, log_phi


def _oprf(x, W, *, phi_sq):
    return _gerf(x, W, A=optimal_gerf_parameter(phi_sq, W.shape[1]))


def _relu(x, W, *, epsilon=1e-3):
    return _no_log(jax.nn.relu(_project(x, W)) + epsilon)


def _elu(x, W):
    del W  # elu+1 is deterministic: it has no projection.
    return _no_log(jax.nn.elu(x) + 1.0)


def _gaussian_trig(x, W):
    wx = _project(x, W)
    return _no_log(jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(W.shape[0]))


def _gaussian_cosine(x, W, *, phases):
    phases = jnp.asarray(phases, jnp.float32)
    if phases.shape != (W.shape[0],):
        raise ValueError(f"phases must have shape [m] = ({W.shape[0]},), got {tuple(phases.shape)}.")
    return _no_log(math.sqrt(2.0 / W.shape[0]) * jnp.cos(_project(x, W) + phases))


@dataclasses.dataclass(frozen=True)
class FeatureMap:
    """A named feature map ``φ(x, W, **params)``; see the module docstring for the formulas.

    Attributes:
      name: registry name.
      terms_fn: ``(x, W, **params) -> (base, log)`` on float32 inputs with
        ``φ = base ⊙ exp(log)``; ``base`` is ``[..., F]`` or None (all ones), ``log`` is
        ``[..., F]`` or ``[..., 1]``.
      kernel: ``"softmax"`` or ``"gaussian"`` for the kernel estimated without bias, ``None`` for
        deterministic maps.
      features_per_vector: features per row of W (2 for [cos, sin] and [exp, exp(-)]); 0 for maps
        without a projection, whose output has the input's dimension.
      temperature_scaled: whether attention feeds it ``q d^{-1/4}`` and ``k d^{-1/4}`` so that
        ``φ(q)ᵀφ(k)`` estimates ``exp(qᵀk/√d)``.
      params: keyword parameters the map accepts.
      required: the subset of ``params`` without a default.
      token_params: the subset of ``params`` given per token: arrays that broadcast against the
        token axes ``[batch..., heads, length]`` (``A``, ``phi_sq``) rather than the features.
      param_checks: ``(name, check)`` pairs; ``check(value)`` raises a ValueError for a concrete
        value outside the parameter's valid range (traced values pass).
    """

    name: str
    terms_fn: Callable[..., tuple[Array | None, Array]]
    kernel: str | None
    features_per_vector: int
    temperature_scaled: bool
    params: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    token_params: tuple[str, ...] = ()
    param_checks: tuple[tuple[str, Callable[[object], object]], ...] = ()

    @property
    def needs_projection(self) -> bool:
        return self.features_per_vector > 0

    def num_outputs(self, num_features: int, dim: int) -> int:
        """Length F of φ(x) for ``num_features`` random vectors and inputs of dimension ``dim``."""
        return self.features_per_vector * num_features if self.needs_projection else dim

    def check_params(self, params: dict) -> None:
        """Raises a TypeError for an unknown parameter, a ValueError for a concrete value out of its range."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise TypeError(
                f"feature map {self.name!r} got unknown parameter(s) {sorted(unknown)}; "
                f"it accepts {list(self.params) or 'none'}."
            )
        for name, check in self.param_checks:
            if name in params:
                check(params[name])

    def terms(self, x: Array, projection: Array | None, **params) -> tuple[Array | None, Array]:
        """Checks the inputs and returns the float32 pair ``(base, log)`` with ``φ = base ⊙ exp(log)``."""
        x = check_floating(x, "x")
        check_rank(x, "x", min_ndim=1, layout="[..., d]")
        self.check_params(params)
        missing = set(self.required) - set(params)
        if missing:
            raise TypeError(f"feature map {self.name!r} needs the parameter(s) {sorted(missing)}.")
        if self.needs_projection:
            if projection is None:
                raise ValueError(f"feature map {self.name!r} needs a projection W of shape [m, d].")
            projection = check_floating(projection, "projection")
            check_rank(projection, "projection", ndim=2, layout="[m, d]")
            if projection.shape[1] != x.shape[-1]:
                raise ValueError(
                    f"projection must have shape [m, d] with d = x.shape[-1] = {x.shape[-1]}, "
                    f"got {tuple(projection.shape)}."
                )
            projection = projection.astype(jnp.float32)
        elif projection is not None:
            raise ValueError(f"feature map {self.name!r} is deterministic and takes no projection; pass None.")
        return self.terms_fn(x.astype(jnp.float32), projection, **params)

    def split(self, x: Array, projection: Array | None, **params) -> tuple[Array, Array]:
        """``(φ̃(x), s(x))`` in float32 with ``φ = φ̃ · exp(s)``, ``s = max log`` per row (no gradient)."""
        base, log = self.terms(x, projection, **params)
        s = row_log_scale(log)
        return features_at(base, log, s), s

    def __call__(self, x: Array, projection: Array | None = None, *, stabilize: bool = False, **params) -> Array:
        """Computes φ(x) in float32 and returns it in ``x.dtype``.

        Args:
          x: inputs ``[..., d]``.
          projection: ``W`` of shape ``[m, d]`` (``None`` for deterministic maps).
          stabilize: if True, return ``φ̃(x) = φ(x) exp(-s(x))``, each row rescaled so that its
            largest exponential is 1. Use it where a per-row factor cancels (attention queries).
          **params: map parameters (``A`` for gerf, ``phi_sq`` for oprf, ``epsilon`` for relu,
            ``phases`` for gaussian_cosine).

        Returns:
          Features ``[..., F]``.

        Example:
          >>> W = rfa.sample_projection(jax.random.key(0), 16, 4)
          >>> rfa.feature_map("positive")(jnp.ones((3, 4)), W).shape
          (3, 16)
        """
        phi, s = self.split(x, projection, **params)
        if not stabilize:
            phi = phi * jnp.exp(s)
        return phi.astype(x.dtype)


_REGISTRY: dict[str, FeatureMap] = {}


def register_feature_map(fm: FeatureMap) -> FeatureMap:
    """Adds a feature map to the registry under ``fm.name`` (an existing name is an error)."""
    if not isinstance(fm, FeatureMap):
        raise TypeError(f"expected a FeatureMap, got {type(fm).__name__}.")
    if fm.name in _REGISTRY:
        raise ValueError(f"a feature map named {fm.name!r} is already registered.")
    _REGISTRY[fm.name] = fm
    return fm


def feature_map(name: str | FeatureMap) -> FeatureMap:
    """Looks up a feature map by name (a ``FeatureMap`` is returned as it is).

    Example:
      >>> phi = rfa.feature_map("positive")
      >>> phi.kernel
      'softmax'
    """
    if isinstance(name, FeatureMap):
        return name
    if name not in _REGISTRY:
        raise ValueError(f"unknown feature map {name!r}; registered: {sorted(_REGISTRY)}.")
    return _REGISTRY[name]


def registered_feature_maps() -> tuple[str, ...]:
    """Names of all registered feature maps."""
    return tuple(sorted(_REGISTRY))


for _fm in (
    FeatureMap("trig", _trig, "softmax", 2, temperature_scaled=True),
    FeatureMap("positive", _positive, "softmax", 1, temperature_scaled=True),
    FeatureMap("hyperbolic", _hyperbolic, "softmax", 2, temperature_scaled=True),
    FeatureMap(
        "gerf",
        _gerf,
        "softmax",
        1,
        temperature_scaled=True,
        params=("A",),
        required=("A",),
        token_params=("A",),
        param_checks=(("A", _check_gerf_parameter),),
    ),
    FeatureMap(
        "oprf",
        _oprf,
        "softmax",
        1,
        temperature_scaled=True,
        params=("phi_sq",),
        required=("phi_sq",),
        token_params=("phi_sq",),
        param_checks=(("phi_sq", _check_phi_sq),),
    ),
    FeatureMap("relu", _relu, None, 1, temperature_scaled=True, params=("epsilon",)),
    FeatureMap("elu", _elu, None, 0, temperature_scaled=False),
    FeatureMap("gaussian_trig", _gaussian_trig, "gaussian", 2, temperature_scaled=True),
    FeatureMap(
        "gaussian_cosine",
        _gaussian_cosine,
        "gaussian",
        1,
        temperature_scaled=True,
        params=("phases",),
        required=("phases",),
    ),
):
    register_feature_map(_fm)
