"""One attention site of a model: a kind and that kind's options (:mod:`rfa.layers.kinds`), and the 0.2 form of a
site, ``AttentionConfig``, kept for one release.

Example:
  >>> Site("positive", num_features=64)  # a variant's name: kernelized attention with positive features
  Site(kind='kernelized', options=KernelizedOptions(num_heads=None, num_features=64, ...))
  >>> Site("sliding_window", window=16).options.size()
  16
"""

from __future__ import annotations

import dataclasses
import warnings

from rfa._validation import InputError, InputTypeError
from rfa.layers.kinds import AttentionKind, KindOptions, attention_kind, variant


@dataclasses.dataclass(frozen=True, init=False)
class Site:
    """The attention of one site: ``kind`` (a registered kind) and ``options`` (an instance of its options class).

    ``Site(name, **options)`` takes a kind's or a variant's name (:func:`rfa.layers.kinds.registered_variants`: an
    estimator's name is kernelized attention with it, ``"gla"`` kernelized attention with elu+1 features and gates
    per feature, ...) and the kind's options as keywords, over the variant's; ``Site(kind, options)`` takes them
    built (and ``dataclasses.replace(site, name=value)`` replaces one). A hybrid stack is a tuple of sites, one per
    layer (cycled).

    Example:
      >>> Site("gla").options.gate, Site("exact") == Site("softmax") == Site()
      ('feature', True)
      >>> Site("gated_deltanet", head_dim=16, num_v_heads=4).options.num_v_heads
      4
    """

    kind: str
    options: KindOptions

    def __init__(self, kind: str = "softmax", options: KindOptions | None = None, **fields):
        name, preset, layers = variant(kind)
        if layers:
            raise InputError(
                f"{kind!r} is a hybrid stack of {list(layers)}: give a tuple of sites, one per layer of the pattern."
            )
        entry = attention_kind(name)
        known = {field.name for field in dataclasses.fields(entry.options)}
        if set(fields) - known:
            raise InputTypeError(
                f"kind {name!r} has no option {sorted(set(fields) - known)}; its options ({entry.options.__name__}): "
                f"{sorted(known)}."
            )
        if options is None:
            options = entry.options(**{**preset, **fields})
        elif preset or not isinstance(options, entry.options):
            raise InputTypeError(
                f"Site({kind!r}, options) takes the kind's options built ({entry.options.__name__}) under the kind's "
                f"own name; got {options!r}."
            )
        elif fields:  # dataclasses.replace(site, field=...): an option replaced
            options = dataclasses.replace(options, **fields)
        object.__setattr__(self, "kind", name)
        object.__setattr__(self, "options", options)

    @property
    def entry(self) -> AttentionKind:
        """The kind's registry entry."""
        return attention_kind(self.kind)

    def replace(self, **fields) -> Site:
        """The site with some options changed.

        Example:
          >>> Site("positive").replace(num_features=16).options.num_features
          16
        """
        return Site(self.kind, dataclasses.replace(self.options, **fields))


_OLD_DEFAULTS = dict(
    num_features=256,
    projection_kind="orthogonal",
    scaling="chi",
    chunk_size=64,
    feature_params=(),
    redraw_every=0,
    gated=False,
    gate="head",
    qk_map=None,
    num_heads=None,
    num_kv_heads=None,
    output_gate=False,
    rope_base=10000.0,
)


def AttentionConfig(kind: str = "softmax", num_features: int = 256, *, delta_rule=None, projection=None, **old):  # noqa: N802
    """rfa 0.2's one config for every kind, kept for one release: the :class:`Site` of the same attention, with a
    ``DeprecationWarning``. ``num_features`` is the kind's size option (m, a window's width, Linformer's k; none for
    exact attention), ``delta_rule`` (a ``DeltaRuleOptions``) the delta rule's layer options, ``feature_params``
    ``(("radius", R),)`` Fourier attention's radius; a field the kind has no option for raises.

    Example:
      >>> with warnings.catch_warnings():
      ...     warnings.simplefilter("ignore")
      ...     AttentionConfig("sliding_window", 16) == Site("sliding_window", window=16)
      True
    """
    warnings.warn(
        "rfa.models.AttentionConfig(kind, num_features, ...) is rfa.models.Site(kind, **options) since rfa 0.3 (each "
        "kind's own options: num_features=, window=, projected_length=, ...); AttentionConfig goes in 0.4.",
        DeprecationWarning,
        stacklevel=2,
    )
    unknown = set(old) - set(_OLD_DEFAULTS)
    if unknown:
        raise InputTypeError(f"AttentionConfig() got unexpected keywords {sorted(unknown)}.")
    if projection is not None:
        old["projection_kind"] = projection
    name, preset, _ = variant(kind)
    options_class = attention_kind(name).options
    fields = {f.name for f in dataclasses.fields(options_class)}
    given = {key: value for key, value in old.items() if value != _OLD_DEFAULTS[key]}
    if name == "fourier" and "feature_params" in given:
        given["radius"] = dict(given.pop("feature_params")).get("radius", 1.0)
    if delta_rule is not None:
        default = type(delta_rule)()
        changed = {f.name: getattr(delta_rule, f.name) for f in dataclasses.fields(delta_rule)}
        given = {key: value for key, value in changed.items() if value != getattr(default, key)} | given
    size = options_class.SIZE or ("num_features" if "num_features" in fields else None)
    if size is not None:
        given.setdefault(size, num_features)
    foreign = sorted(set(given) - fields)
    if foreign:
        raise InputError(f"AttentionConfig: kind {kind!r} has no option {foreign}; its options: {sorted(fields)}.")
    return Site(name, **{**preset, **given})
