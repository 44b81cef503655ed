"""A training config's attention: its variants (the names a config string selects, from the registry of
:mod:`rfa.layers.kinds`) and the :class:`rfa.models.Site` of each layer at each site.

``config.attention`` holds one kind's fields: ``kind`` (a kind, or an estimator: kernelized attention with it),
``num_features`` (the kind's size option, :attr:`rfa.layers.KindOptions.SIZE`: m, a window's width, Linformer's k),
the map's options and the gate, and ``layers`` (a hybrid stack: variants cycled over the layers). A variant writes
its options into these fields; a field the kind has no option for plays no part at its sites.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import ml_collections

from rfa.layers.kinds import attention_kind, registered_variants, variant
from rfa.models import Site
from rfa.workdir import ConfigError

FIELDS = ("num_features", "projection_kind", "scaling", "chunk_size", "feature_params", "redraw_every", "gated", "gate")
FIELDS += ("qk_map",)  # the fields of config.attention that set a kind's options (kind and layers choose the kind)
ROLES = {"decoder": "causal", "encoder": "bidirectional", "cross": "cross"}  # what each site of a model runs


def variant_fields(name: str) -> dict:
    """The fields of ``config.attention`` that the variant ``name`` sets.

    Example:
      >>> variant_fields("gla"), variant_fields("sliding_window")
      ({'kind': 'elu', 'gated': True, 'gate': 'feature'}, {'kind': 'sliding_window'})
      >>> variant_fields("hybrid_kda")["layers"]
      ('kda', 'kda', 'kda', 'exact')
    """
    kind, options, layers = variant(name)
    if layers:
        return {"kind": variant_fields(layers[0])["kind"], "layers": layers}
    fields = {"kind": options.get("estimator", kind)}
    size = attention_kind(kind).options.SIZE
    for option, value in options.items():
        field = "num_features" if option == size else option
        if option != "estimator" and field not in FIELDS:
            raise ConfigError(
                f"variant {name!r} sets {option}, which config.attention has no field for ({list(FIELDS)}); train it "
                "from a model config (rfa.models.Site), or register a variant without it."
            )
        if option != "estimator":
            fields[field] = value
    return fields


class Variants(collections.abc.Mapping):
    """Every registered variant's fields (:func:`variant_fields`), read from the registry when asked: a kind or an
    estimator registered later is a variant too. ``rfa.train.ATTENTION_VARIANTS`` is the one instance."""

    def __getitem__(self, name: str) -> dict:
        if name not in registered_variants():
            raise KeyError(name)
        return variant_fields(name)

    def __iter__(self):
        return iter(registered_variants())

    def __len__(self) -> int:
        return len(registered_variants())


ATTENTION_VARIANTS = Variants()


def layer_site(a: dict) -> Site:
    """The site of one layer's fields, before a model's sites apply their rules (:func:`site_attention`).

    Example:
      >>> layer_site({"kind": "sliding_window", "num_features": 16}).options.window
      16
    """
    try:
        base = Site(a["kind"])
    except ValueError as error:
        raise ConfigError(f"config.attention.kind: {error}") from error
    options = base.entry.options
    names = {field.name for field in dataclasses.fields(options)}
    given = {name: a[name] for name in FIELDS if name in names and name in a}
    if options.SIZE is not None and "num_features" in a:
        given[options.SIZE] = a["num_features"]
    if "qk_map" in given:
        given["qk_map"] = given["qk_map"] or None  # "": the papers' map
    if "feature_params" in given:
        given["feature_params"] = tuple((name, float(value)) for name, value in given["feature_params"])
    return Site(base.kind, dataclasses.replace(base.options, **given))


def site_attention(a: dict, head_dim: int, site: str) -> Site:
    """The attention of one layer at one site of a model: the fields' site, gated at the decoder's self-attention
    only, with parameters that would be fitted fixed where the site decodes from a state (the decoder's sites,
    :meth:`rfa.layers.KindOptions.for_state`); a kind that cannot run the site leaves it exact (the decoder's
    self-attention for one that cannot be causal, Linformer; the encoder's for one that can only be causal, the delta
    rule; cross-attention for one without a memory, the delta rule and a sliding window)."""
    attention = layer_site(a)
    if not attention.entry.runs(ROLES[site]):
        return Site()
    options = attention.options
    if "gated" in {field.name for field in dataclasses.fields(options)}:
        options = dataclasses.replace(options, gated=bool(options.gated) and site == "decoder")
    if site != "encoder":
        options = options.for_state(head_dim)
    return Site(attention.kind, options)


def layer_variants(config: ml_collections.ConfigDict, defaults: dict) -> tuple[dict, ...]:
    """The attention fields of each layer of a hybrid stack (``config.attention.layers``, variant names cycled over
    the layers): the variant's fields over ``defaults`` (the base config's), with the config's m, projection and
    chunk size; one entry, ``config.attention`` itself, without layers."""
    a = config.attention
    names = tuple(a.get("layers", ()))  # (a workdir of an earlier release has no such field)
    if not names:
        return (a.to_dict(),)
    unknown = [name for name in names if name not in registered_variants()]
    if unknown:
        raise ConfigError(
            f"config.attention.layers: {unknown} are not variants; choose from {sorted(registered_variants())}."
        )
    shared = {
        name: a[name]
        for name in ("num_features", "projection_kind", "scaling", "chunk_size", "redraw_every", "feature_params")
    }
    nested = [name for name in names if variant(name)[2]]
    if nested:
        raise ConfigError(f"config.attention.layers: {nested} are hybrid stacks themselves; list single kinds.")
    return tuple(defaults | shared | variant_fields(name) for name in names)


def site_attentions(config: ml_collections.ConfigDict, defaults: dict, head_dim: int, site: str):
    """The attention of one site: one :class:`rfa.models.Site`, or one per layer of a hybrid stack (cycled)."""
    layers = tuple(site_attention(a, head_dim, site) for a in layer_variants(config, defaults))
    return layers[0] if len(set(layers)) == 1 else layers  # a site where every layer is alike: one site
