"""The variables of a kernelized attention's map, one module for the Flax layers and rfa's models alike.

A map (an :class:`~rfa.random_features.feature_maps.Estimator`) may hold four kinds of parameters, each an
``nnx`` variable of the attention that uses it:

- the random projection W and the map's other ``sampled`` parameters (:class:`RandomProjection`; drawn from
  :func:`projection_key`, redrawn, never trained: Choromanski et al., "Rethinking Attention with Performers",
  ICLR 2021, Sec. 4 on feature redrawing);
- its ``learned`` parameters (``nnx.Param``, trained with the model: Hedgehog's W and b);
- the parameters it ``fitted`` on calibration data (:class:`FittedParams`: OPRF's and the DERFs' A);
- its ``fixed`` ones, configuration (Python numbers).

:class:`RandomMap` is an attention holding random variables, :func:`redraw` redraws every one in a model
(one key derivation: ``fold_in(key, i)`` for the i-th), and :class:`Calibratable` adds learned and fitted
parameters with :func:`calibrating`. ``rfa.nnx`` and ``rfa.layers.attention_fn`` (the Flax layers) and
``rfa.models`` (the kernelized and delta-rule cores) build their attentions on these.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses

import jax
from flax import nnx

from rfa._validation import InputError, InputTypeError, check_key
from rfa.attention.calibration import fit_feature_params
from rfa.layers.kinds import KindOptions, check_int
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.projections import PROJECTION_KINDS, ROW_SCALINGS

Array = jax.Array


def projection_key(rngs: nnx.Rngs) -> Array:
    """The key of an attention's random variables: the ``projection`` stream's next key, else one derived from
    the ``params`` stream's next key without advancing it, so every weight drawn after the attention is the one
    ``nnx`` layers would draw from the same ``rngs``.

    Example:
      >>> a, b = projection_key(nnx.Rngs(0)), projection_key(nnx.Rngs(params=0, projection=1))
      >>> bool(jnp.all(jax.random.key_data(a) == jax.random.key_data(projection_key(nnx.Rngs(0)))))
      True
    """
    if "projection" in rngs:
        return rngs.projection()
    stream = rngs.params
    return jax.random.fold_in(jax.random.fold_in(stream.key[...], stream.count[...]), 0x5EED)


def scalar_params(feature_params: dict | None) -> dict:
    """Feature parameters held by a module are configuration: Python numbers only."""
    params = dict(feature_params or {})
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputTypeError(
                f"feature_params of make_attention_fn must be Python numbers, got {name}={value!r}; "
                "per-head or data-dependent arrays go to rfa.kernelized_attention(feature_params=...) directly."
            )
    return params


@dataclasses.dataclass(frozen=True, kw_only=True)
class MapOptions(KindOptions):
    """The options of a random-feature map, for the kinds that use one (kernelized attention, the delta rule's
    ``qk_map``).

    Attributes:
      num_features: m, the random vectors of the projection W (Hedgehog: its feature dimension d').
      projection_kind: how W's rows are drawn, a kind of ``rfa.sample_projection`` (``"orthogonal"``, ``"iid"``,
        ``"simplex"`` or a registered one).
      scaling: W's row norms, ``"chi"`` (rows marginally Gaussian) or ``"sqrt_d"``.
      feature_params: the map's fixed parameters as ``((name, value), ...)``, e.g. ``(("phi_sq", 2.0),)`` for
        OPRF, which needs it fixed at causal and decoding sites (a dict is taken too, and kept sorted).
      redraw_every: a new projection every this many training steps (:func:`redraw` with ``step=``); 0 keeps the
        first draw.

    Example:
      >>> MapOptions(num_features=16, feature_params={"phi_sq": 2.0}).params
      {'phi_sq': 2.0}
    """

    num_features: int = 256
    projection_kind: str = "orthogonal"
    scaling: str = "chi"
    feature_params: tuple[tuple[str, float], ...] = ()
    redraw_every: int = 0

    def __post_init__(self):
        super().__post_init__()
        check_int(self, "num_features")
        check_int(self, "redraw_every", 0)
        if self.projection_kind not in PROJECTION_KINDS or self.scaling not in ROW_SCALINGS:
            raise InputError(
                f"projection_kind must be one of {list(PROJECTION_KINDS)} and scaling one of {list(ROW_SCALINGS)}, "
                f"got {self.projection_kind!r} and {self.scaling!r}."
            )
        pairs = sorted(self.feature_params.items()) if isinstance(self.feature_params, dict) else self.feature_params
        if not all(isinstance(pair, tuple | list) and len(pair) == 2 for pair in pairs):
            raise InputError(f"feature_params must be ((name, value), ...), got {self.feature_params!r}.")
        object.__setattr__(self, "feature_params", tuple((str(name), value) for name, value in pairs))

    @property
    def params(self) -> dict:
        """``feature_params`` as a dict."""
        return dict(self.feature_params)


class RandomProjection(nnx.Variable):
    """The random projection W ``[m, d_k]`` of a kernelized attention (or a random parameter drawn with it,
    such as hybrid's R): redrawn, never trained. Through ``flax.nnx.bridge`` it is the Linen collection
    ``random_features``, as in ``rfa.linen``'s own layers."""


nnx.register_variable_name("random_features", RandomProjection)


def random_variables(fm: Estimator, key, num_features, head_dim, *, projection_kind, scaling) -> tuple:
    """``(projection, random_params)`` of one draw (``fm.draw``): a :class:`RandomProjection` of W (None
    for a map without a projection) and an ``nnx.Dict`` of one per ``sampled`` parameter."""
    W, sampled = fm.draw(key, num_features, head_dim, projection_kind=projection_kind, scaling=scaling)
    projection = None if W is None else RandomProjection(W)
    return projection, nnx.Dict({name: RandomProjection(value) for name, value in sampled.items()})


def redraw_variables(
    projection, random_params, fm: Estimator, key, num_features, head_dim, *, projection_kind, scaling
):
    """Overwrites the variables of :func:`random_variables` with the draw of ``key`` (no retracing)."""
    W, sampled = fm.draw(key, num_features, head_dim, projection_kind=projection_kind, scaling=scaling)
    if projection is not None:
        projection[...] = W
    for name, value in sampled.items():
        random_params[name][...] = value


def learned_variables(fm: Estimator, num_heads: int, num_features: int, head_dim: int) -> nnx.Dict:
    """The map's ``learned`` parameters (``fm.init_learned``) as ``nnx.Param`` s, ``[num_heads, 1, *event]``."""
    values = fm.init_learned(num_heads, num_features, head_dim) if fm.learned else {}
    return nnx.Dict({name: nnx.Param(value) for name, value in values.items()})


class FittedParams(nnx.Variable):
    """Feature-map parameters fitted on calibration data (:meth:`KernelizedAttention.calibrate`): state, not
    trained."""


class RandomMap(nnx.Module):
    """An attention whose map draws random variables (``projection``, ``random_params``) and redraws them
    (``redraw(key)``): the unit :func:`redraw` walks. ``redraw_every`` is its redrawing policy in training steps
    (0: none; rfa's layers read it from their options' ``redraw_every``)."""

    redraw_every: int = 0


def redraw(model: nnx.Module, key: Array, *, step: int | None = None) -> int:
    """Redraws the random projection (and the map's other random parameters) of every attention in ``model``;
    returns how many. ``rfa.nnx.redraw`` and ``rfa.models.redraw_projections`` are this function.

    Each :class:`RandomMap` (the ``attention_fn`` of ``rfa.nnx.MultiHeadAttention`` and of
    :func:`make_attention_fn`, the kernelized and delta-rule cores of rfa's layers and models) that holds random
    variables gets the subkey ``fold_in(key, i)``, i its place among them in module order. With ``step`` (the
    training step) one is redrawn only when its ``redraw_every`` = k > 0 divides ``step``, so a training loop calls
    it every step. Under ``nnx.jit`` the variables are state: a redraw changes the next call without retracing.

    Example:
      >>> model = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(0))
      >>> rfa.nnx.redraw(model, jax.random.key(1)), rfa.nnx.redraw(model, jax.random.key(2), step=10)
      (1, 0)
    """
    key = check_key(key)
    redrawn = 0
    for i, attention in enumerate(m for _, m in nnx.iter_modules(model) if isinstance(m, RandomMap)):
        every = attention.redraw_every
        due = step is None or (every > 0 and step % every == 0)
        if due and (attention.projection is not None or attention.random_params):
            attention.redraw(jax.random.fold_in(key, i))
            redrawn += 1
    return redrawn


class Calibratable(RandomMap):
    """A kernelized attention with its map's variables: random, learned, and fitted on calibration data.

    Subclasses set ``self.estimator``, ``self.random_params`` (:func:`random_variables`),
    ``self.learned_params`` (:func:`learned_variables`) and call :meth:`init_calibration`;
    :meth:`map_params` gives a call's parameters, and :func:`calibrating` fits from the calls inside it.
    """

    def init_calibration(self) -> None:
        self.fitted_params = nnx.Dict()
        self.calibrating = False

    def calibrate(self, query: Array, key: Array, mask: Array | None = None) -> None:
        """Fits the map's parameters to calibration queries and keys ``[batch..., length, heads, head_dim]``
        (one set per head, :func:`rfa.attention.fit_feature_params`) and keeps them for every later call."""
        fitted = fit_feature_params(self.estimator, query, key, mask=mask)
        self.fitted_params = nnx.Dict({name: FittedParams(value) for name, value in fitted.items()})

    def map_params(self, fixed: dict | None) -> dict | None:
        """A call's map parameters: the ``fixed`` ones, the current random draw, the learned ones and the
        calibrated fit (which takes precedence); None if there are none."""
        variables = {**arrays(self.random_params), **arrays(self.learned_params), **arrays(self.fitted_params)}
        return {**(fixed or {}), **variables} or None


def arrays(variables: nnx.Dict) -> dict:
    """``{name: array}`` of a dict of variables (an ``nnx.Dict``), without the entries nnx sets on every module of
    its own (``nnx.capture``'s ``__captures__``)."""
    return {name: variable[...] for name, variable in variables.items() if isinstance(variable, nnx.Variable)}


@contextlib.contextmanager
def calibrating(model: nnx.Module):
    """Within the block, every :class:`KernelizedAttention` in ``model`` (and every kernelized attention of
    rfa's own models) fits its parameters to the queries and keys of each (eager) call and keeps them:
    run calibration batches through an unmodified model. Each site keeps its own parameters; one attention
    module shared by several sites (the same ``make_attention_fn`` passed to every layer) is refused with a
    ValueError, as its single set of parameters would be fitted to one site and used at all.

    Example:
      >>> fn = rfa.make_attention_fn("aderf", 32, head_dim=8, key=jax.random.key(0))
      >>> mha = nnx.MultiHeadAttention(2, 16, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
      >>> with rfa.layers.calibrating(mha):
      ...     _ = mha(jax.random.normal(jax.random.key(1), (4, 24, 16)))
      >>> y = mha(jnp.ones((1, 5, 16)), is_causal=True)  # causal: uses the calibrated parameters
      >>> fn.fitted_params["A"].shape
      (2, 1, 1)
    """
    attention_fns = [
        module
        for _, module in nnx.iter_graph(model)
        if isinstance(module, Calibratable) and module.estimator is not None and module.estimator.fit is not None
    ]  # the attentions whose map fits parameters: the others have nothing to calibrate
    uses = collections.Counter(
        id(child)
        for _, node in nnx.iter_graph(model)
        if isinstance(node, nnx.Pytree)  # modules, nnx.List and nnx.Dict: the containers of sites
        for _, child in nnx.graph.iter_children(node)
    )
    for fn in attention_fns:
        if uses[id(fn)] > 1:
            raise InputError(
                f"one {fn.estimator.name!r} attention module is used by {uses[id(fn)]} attention sites of the model: "
                "calibrating would fit one set of parameters to whichever site ran last and use it at every site. "
                "Give each site its own rfa.make_attention_fn(...) (one per nnx.MultiHeadAttention)."
            )
    for fn in attention_fns:
        fn.calibrating = True
    try:
        yield model
    finally:
        for fn in attention_fns:
            fn.calibrating = False
