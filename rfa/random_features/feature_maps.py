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

The registered estimators live in :mod:`rfa.random_features.estimators`, one module per family,
each with its maps and its closed-form theory: trig, positive, hyperbolic, gerf and oprf estimate
the softmax kernel ``SM(x, y) = exp(xᵀy)`` without bias, gaussian_trig and gaussian_cosine the
Gaussian kernel ``exp(-|x-y|²/2)``; relu and elu are deterministic baselines that estimate no
kernel. ``rfa.registered_feature_maps()`` lists them; :func:`register_feature_map` adds one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, InputTypeError, check_floating, check_rank, renamed_function, renamed_keywords
from rfa.random_features.projections import sample_projection

if TYPE_CHECKING:
    from rfa.random_features.closed_forms import Theory

Array = jax.Array
_HIGHEST = jax.lax.Precision.HIGHEST


def project(x: Array, W: Array) -> Array:
    """``Wx`` for ``x [..., d]`` and ``W [m, d]``, at the inputs' full precision: ``[..., m]``."""
    return jnp.einsum("...d,md->...m", x, W, precision=_HIGHEST)


def half_sq_norm(x: Array) -> Array:
    """``|x|²/2`` over the last axis, kept: ``[..., 1]``."""
    return 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)


def row_log_scale(log: Array) -> Array:
    """``s(x) = max log(x)`` over the features of each row, ``[..., 1]``, without gradient."""
    return jax.lax.stop_gradient(jnp.max(log, axis=-1, keepdims=True))


def features_at(base: Array | None, log: Array, offset: Array) -> Array:
    """``base ⊙ exp(log - offset)``: the features divided by ``exp(offset)`` (an offset of +inf gives 0)."""
    scaled = jnp.exp(log - offset)
    return scaled if base is None else base * scaled


def no_log(base: Array) -> tuple[Array, Array]:
    """``(base, 0)``: the terms of a map without exponentials."""
    return base, jnp.zeros(base.shape[:-1] + (1,), base.dtype)


FIXED, FITTED, SAMPLED, LEARNED = "fixed", "fitted", "sampled", "learned"
SOURCES = (FIXED, FITTED, SAMPLED, LEARNED)


@dataclasses.dataclass(frozen=True)
class Param:
    """One keyword parameter of an estimator's maps, described once.

    Attributes:
      name: the keyword the maps take.
      source: where its value comes from when the caller gives none: ``"fixed"`` (the map's default, or
        the caller's value), ``"fitted"`` (fitted from the queries and keys: :attr:`Estimator.fit`),
        ``"sampled"`` (drawn with the projection: :attr:`Estimator.sample_params`) or ``"learned"``
        (trained with the model: :attr:`Estimator.init_learned`).
      required: the maps have no default for it: a call must pass it (its source supplies it).
      per_token: given per token: an array that broadcasts against the token axes ``[batch..., heads,
        length]`` followed by the parameter's own ``event_ndim`` axes (OPRF's ``phi_sq``, DERF's ``A``),
        rather than one value for every token (hybrid's ``R``, the phases of ``gaussian_cosine``).
      event_ndim: axes of one token's value (DERF's per-coordinate ``A`` has 1, its transforms 2).
      check: ``check(value)`` raises a ValueError for a concrete value outside the valid range
        (traced values pass); None: any value.

    Example:
      >>> Param("phi_sq", FITTED, required=True, per_token=True).per_token
      True
    """

    name: str
    source: str = FIXED
    required: bool = False
    per_token: bool = False
    event_ndim: int = 0
    check: Callable[[object], object] | None = None

    def __post_init__(self):
        if self.source not in SOURCES:
            raise InputError(f"Param {self.name!r}: source must be one of {list(SOURCES)}, got {self.source!r}.")
        if self.event_ndim and not self.per_token:
            raise InputError(f"Param {self.name!r}: event_ndim describes a per-token value; set per_token=True.")


@dataclasses.dataclass(frozen=True)
class Estimator:
    """One estimator: its query and key feature maps ``φ(x, W, **params)``, the kernel it estimates and its theory.

    ``φ_q(x)ᵀφ_k(y)`` estimates ``kernel(x, y)``; for most estimators ``φ_q = φ_k``. Everything that
    uses estimators (kernel estimates, every attention mode, ``rfa.theory``, the experiment runner)
    reads this object, so a new estimator is one module that builds one and registers it. Each
    parameter of the maps is one :class:`Param`, which says where its value comes from.

    Attributes:
      name: registry name.
      terms_fn: the query map, ``(x, W, **params) -> (base, log)`` on float32 (or float64) inputs with
        ``φ = base ⊙ exp(log)``; ``base`` is ``[..., F]`` or None (all ones), ``log`` is
        ``[..., F]`` or ``[..., 1]``.
      kernel: ``"softmax"`` or ``"gaussian"`` for the kernel estimated without bias, ``None`` for
        deterministic maps.
      features_per_vector: features per row of W (2 for [cos, sin] and [exp, exp(-)]); 0 for maps
        without a projection, whose output has the input's dimension.
      temperature_scaled: whether attention feeds it ``q d^{-1/4}`` and ``k d^{-1/4}`` so that
        ``φ(q)ᵀφ(k)`` estimates ``exp(qᵀk/√d)``.
      params: the maps' keyword parameters, one :class:`Param` each.
      key_terms_fn: the key map when it differs from the query map (asymmetric estimators).
      positive: whether every feature is > 0, so that the attention normalizer is > 0.
      theory: the closed forms (:class:`rfa.random_features.closed_forms.Theory`), None if none is known.
      fit: ``(q, k, keep_q, keep_k) -> {name: value}`` for the ``"fitted"`` parameters, from
        ``q [batch..., length_q, d]`` and ``k [batch..., length_k, d]`` (as the map sees them) and
        optional ``[batch..., length, 1]`` masks; the values broadcast against ``[batch..., length]``
        and carry no gradient. A call that gives none of them fits them all; one that gives some
        uses those and the defaults (:meth:`to_fit`).
      standard_params: ``dim -> {name: value}``, the fitted parameters for queries and keys with
        independent N(0, 1) entries (the default where they must be fixed in advance: causal mode).
      sample_params: ``(key, num_features, dim) -> {name: value}`` draws the ``"sampled"`` parameters.
      outputs: ``(num_features, dim) -> F`` where F is not ``features_per_vector`` per random vector (or
        ``dim`` for a map without a projection): Taylor's ``1 + d + d(d+1)/2``, Hedgehog's ``2·num_features``.
      init_learned: ``(num_heads, num_features, dim) -> {name: value}``, the ``"learned"`` parameters'
        initial values, ``[num_heads, 1, *event]`` (one per head, broadcast along the length): rfa's
        models and :func:`rfa.make_attention_fn` hold them as ``nnx.Param``.
    """

    name: str
    terms_fn: Callable[..., tuple[Array | None, Array]]
    kernel: str | None
    features_per_vector: int
    temperature_scaled: bool
    params: tuple[Param, ...] = ()
    key_terms_fn: Callable[..., tuple[Array | None, Array]] | None = None
    positive: bool = False
    theory: Theory | None = None
    fit: Callable[..., dict] | None = None
    standard_params: Callable[[int], dict] | None = None
    sample_params: Callable[..., dict] | None = None
    outputs: Callable[[int, int], int] | None = None
    init_learned: Callable[..., dict] | None = None

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        if not all(isinstance(p, Param) for p in self.params):
            raise InputTypeError(f"Estimator {self.name!r}: params must be rfa.Param specs, got {self.params!r}.")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise InputError(f"Estimator {self.name!r}: a parameter is described twice in {names}.")
        for source, function, field in (
            (FITTED, self.fit, "fit"),
            (SAMPLED, self.sample_params, "sample_params"),
            (LEARNED, self.init_learned, "init_learned"),
        ):
            if bool(self.names(source)) != (function is not None):
                raise InputError(
                    f"Estimator {self.name!r}: {source} parameters need {field}, and {field} needs {source} parameters."
                )

    def names(self, source: str | None = None) -> tuple[str, ...]:
        """The parameters' names, or those whose values come from ``source`` (``"fitted"``, ...)."""
        return tuple(p.name for p in self.params if source is None or p.source == source)

    def param(self, name: str) -> Param:
        """The spec of the parameter ``name``."""
        return {p.name: p for p in self.params}[name]

    @property
    def fitted(self) -> tuple[str, ...]:
        return self.names(FITTED)

    @property
    def sampled(self) -> tuple[str, ...]:
        return self.names(SAMPLED)

    @property
    def learned(self) -> tuple[str, ...]:
        return self.names(LEARNED)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.required)

    @property
    def token_params(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.per_token)

    def event_ndim(self, name: str) -> int:
        """Axes of one token's value of the parameter ``name`` (0 for a number per token)."""
        return self.param(name).event_ndim

    def to_fit(self, params: dict | None) -> tuple[str, ...]:
        """The ``fitted`` parameters a fit from data must supply: all of them when none is in ``params``."""
        given = set(params or {})
        return () if given & set(self.fitted) else self.fitted

    @property
    def needs_projection(self) -> bool:
        return self.features_per_vector > 0

    @property
    def uses_num_features(self) -> bool:
        """Whether ``num_features`` sets the map's output length F: random vectors, or learned features (Hedgehog's
        d'); false for the fixed maps (elu, taylor), whose F depends on the input dimension only."""
        return self.num_outputs(1, 2) != self.num_outputs(2, 2)

    def num_outputs(self, num_features: int, dim: int) -> int:
        """Length F of φ(x) for ``num_features`` random vectors (or learned features) and inputs of dimension d."""
        if self.outputs is not None:
            return self.outputs(num_features, dim)
        return self.features_per_vector * num_features if self.needs_projection else dim

    def draw(
        self, key: Array, num_features: int, dim: int, *, projection_kind: str = "orthogonal", scaling: str = "chi"
    ) -> tuple[Array | None, dict]:
        """One draw of the estimator's randomness: ``(W, sampled)``.

        ``W [num_features, dim]`` from ``key`` (``rfa.sample_projection``; None for a map without a
        projection) and the ``sampled`` parameters from ``fold_in(key, 1)``. ``projection_kind`` and ``scaling`` are
        ``rfa.sample_projection``'s (``kind=``, the name before rfa 0.3, works until 0.4).

        Example:
          >>> W, sampled = rfa.estimator("hybrid").draw(jax.random.key(0), 16, 8)
          >>> W.shape, sampled["angular"].shape
          ((16, 8), (1, 8))
        """
        W = (
            sample_projection(key, num_features, dim, projection_kind=projection_kind, scaling=scaling)
            if self.needs_projection
            else None
        )
        sampled = self.sample_params(jax.random.fold_in(key, 1), num_features, dim) if self.sample_params else {}
        return W, sampled

    draw = renamed_keywords(kind="projection_kind")(draw)

    def check_params(self, params: dict) -> None:
        """Raises a TypeError for an unknown parameter, a ValueError for a concrete value out of its range."""
        unknown = set(params) - set(self.names())
        if unknown:
            raise InputTypeError(
                f"feature map {self.name!r} got unknown parameter(s) {sorted(unknown)}; "
                f"it accepts {list(self.names()) or 'none'}."
            )
        for spec in self.params:
            if spec.check is not None and spec.name in params:
                spec.check(params[spec.name])

    def terms(self, x: Array, projection: Array | None, *, side: str = "query", **params) -> tuple[Array | None, Array]:
        """Checks the inputs and returns the pair ``(base, log)`` with ``φ = base ⊙ exp(log)``, float32 (float64 for
        float64 x).

        ``side="key"`` gives the key map's terms (the same as the query map's for symmetric estimators).
        """
        x = check_floating(x, "x")
        check_rank(x, "x", min_ndim=1, layout="[..., d]")
        self.check_params(params)
        missing = set(self.required) - set(params)
        if missing:
            raise InputTypeError(f"feature map {self.name!r} needs the parameter(s) {sorted(missing)}.")
        if self.needs_projection:
            if projection is None:
                raise InputError(f"feature map {self.name!r} needs a projection W of shape [m, d].")
            projection = check_floating(projection, "projection")
            check_rank(projection, "projection", ndim=2, layout="[m, d]")
            if projection.shape[1] != x.shape[-1]:
                raise InputError(
                    f"projection must have shape [m, d] with d = x.shape[-1] = {x.shape[-1]}, "
                    f"got {tuple(projection.shape)}."
                )
            projection = projection.astype(computation_dtype(x))
        elif projection is not None:
            raise InputError(f"feature map {self.name!r} is deterministic and takes no projection; pass None.")
        if side not in ("query", "key"):
            raise InputError(f"side must be 'query' or 'key', got {side!r}.")
        terms_fn = self.key_terms_fn if side == "key" and self.key_terms_fn is not None else self.terms_fn
        return terms_fn(x.astype(computation_dtype(x)), projection, **params)

    def split(self, x: Array, projection: Array | None, *, side: str = "query", **params) -> tuple[Array, Array]:
        """``(φ̃(x), s(x))`` with ``φ = φ̃ · exp(s)``, ``s = max log`` per row (no gradient), in float32 (float64 for
        float64 x)."""
        base, log = self.terms(x, projection, side=side, **params)
        s = row_log_scale(log)
        return features_at(base, log, s), s

    def __call__(
        self, x: Array, projection: Array | None = None, *, stabilize: bool = False, side: str = "query", **params
    ) -> Array:
        """Computes φ(x) in float32 (float64 for float64 x) and returns it in ``x.dtype``.

        Args:
          x: inputs ``[..., d]``.
          projection: ``W`` of shape ``[m, d]`` (``None`` for deterministic maps).
          side: ``"query"`` or ``"key"``, the map of that side (they differ for asymmetric estimators).
          stabilize: if True, return ``φ̃(x) = φ(x) exp(-s(x))``, each row rescaled so that its
            largest exponential is 1. Use it where a per-row factor cancels (attention queries).
          **params: map parameters (``A`` for gerf, ``phi_sq`` for oprf, ``epsilon`` for relu,
            ``phases`` for gaussian_cosine).

        Returns:
          Features ``[..., F]``.

        Example:
          >>> W = rfa.sample_projection(jax.random.key(0), 16, 4)
          >>> rfa.estimator("positive")(jnp.ones((3, 4)), W).shape
          (3, 16)
        """
        phi, s = self.split(x, projection, side=side, **params)
        if not stabilize:
            phi = phi * jnp.exp(s)
        return phi.astype(x.dtype)


FeatureMap = Estimator  # the name before 0.2; kept for one release (docs/changelog.md)

_REGISTRY: dict[str, Estimator] = {}


def register_estimator(fm: Estimator) -> Estimator:
    """Adds an estimator to the registry under ``fm.name`` (an existing name is an error)."""
    if not isinstance(fm, Estimator):
        raise InputTypeError(f"expected an rfa.Estimator, got {type(fm).__name__}.")
    if fm.name in _REGISTRY:
        raise InputError(f"an estimator named {fm.name!r} is already registered.")
    _REGISTRY[fm.name] = fm
    return fm


def estimator(name: str | Estimator) -> Estimator:
    """Looks up an estimator by name (an ``Estimator`` is returned as it is).

    Example:
      >>> phi = rfa.estimator("positive")
      >>> phi.kernel
      'softmax'
    """
    if isinstance(name, Estimator):
        return name
    if name not in _REGISTRY:
        raise InputError(f"unknown estimator {name!r}; registered: {sorted(_REGISTRY)}.")
    return _REGISTRY[name]


def registered_estimators() -> tuple[str, ...]:
    """Names of all registered estimators."""
    return tuple(sorted(_REGISTRY))


# the names before rfa 0.3, kept for one release (docs/changelog.md)
feature_map = renamed_function(estimator, "feature_map")
register_feature_map = renamed_function(register_estimator, "register_feature_map")
registered_feature_maps = renamed_function(registered_estimators, "registered_feature_maps")
