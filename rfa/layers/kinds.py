"""The registry of attention kinds: one entry per kind, registered in the module that defines its layer.

A kind is what one attention site of a model computes: exact softmax attention, kernelized attention (with any
registered estimator, an option of the kind), Linformer, a sliding window, the delta rule's layers, or a kind of your
own. Its :class:`AttentionKind` entry holds all that a
model, a training config or a study asks of it, so nothing else lists kinds:

- its ``name`` and ``options``, the dataclass of the kind's own options (a subclass of :class:`KindOptions`, with
  defaults and validation; ``options.check_site`` refuses what the kind cannot run at a model's site);
- ``layer``: ``layer(widths, options, *, causal, cross, rngs)``, the module of one site (:class:`SiteWidths`: what
  the site reads of its model), with the site interface of :class:`rfa.layers.multi_head.AttentionSite`;
- where it runs: ``causal`` (masked self-attention, decoded token by token), ``bidirectional``, ``cross`` (to a
  memory), and ``dense_masks`` (any dense mask, such as Swin's shifted windows);
- ``cache``: how its decode cache grows, ``"fixed"`` (a state or a ring, the same size at any position) or
  ``"length"`` (the keys and values so far); None for a kind that never decodes.

A *variant* is a named setting of a kind (:func:`register_variant`): the names training configs select
(``sort:gla``), and the patterns of a hybrid stack. Every kind is a variant of its own name with default options, and
every estimator one of kernelized attention (``"positive"``).

Example:
  >>> kind = attention_kind("gated_deltanet")
  >>> kind.causal_only, kind.cache, kind.options.__name__
  (True, 'fixed', 'DeltaRuleOptions')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from rfa._validation import InputError, InputTypeError

CACHES = ("fixed", "length")


@dataclasses.dataclass(frozen=True)
class SiteWidths:
    """What a site's layer reads of its model (a model's come from ``EncoderConfig.at_site``; a drop-in layer such as
    ``rfa.nnx.GatedLinearAttention`` makes its own from its arguments): the widths, the dtype, the positions (with
    ``cross_rotary``: cross-attention rotates its queries and keys too), and the mesh axis that splits the sequence.
    ``head_width`` sets a head's width apart from ``d_model / num_heads``.

    Example:
      >>> SiteWidths(d_model=32, num_heads=4).head_dim
      8
    """

    d_model: int
    num_heads: int
    dtype: str = "float32"
    positional: str = "sinusoidal"
    sequence_axis: str | None = None
    max_length: int | None = None
    relative_buckets: int = 32
    relative_max_distance: int = 128
    cross_rotary: bool = False
    head_width: int | None = None

    @property
    def head_dim(self) -> int:
        """A head's width: ``head_width`` where the site sets one (Qwen3's 128 at d_model 1024 and 16 heads), else
        ``d_model / num_heads``."""
        return self.head_width or self.d_model // self.num_heads

    def rotary(self, cross: bool) -> bool:
        """Whether a site rotates its queries and keys by their positions."""
        return self.positional == "rotary" and (not cross or self.cross_rotary)


def check_int(options, name: str, minimum: int = 1, *, optional: bool = False) -> None:
    """Refuses ``options.name`` unless it is an int >= ``minimum`` (or None, when ``optional``)."""
    value = getattr(options, name)
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(
            f"{type(options).__name__}.{name} must be {'None or ' if optional else ''}an int >= {minimum}, got "
            f"{value!r}."
        )


def check_bool(options, *names: str) -> None:
    for name in names:
        if not isinstance(getattr(options, name), bool):
            raise InputTypeError(f"{type(options).__name__}.{name} must be a bool, got {getattr(options, name)!r}.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class KindOptions:
    """The options every kind has, the base of each kind's options.

    Attributes:
      num_heads: the site's heads (None: the model's ``num_heads``); hybrid stacks give each layer its own.

    ``SIZE`` names the option that sets how much the kind keeps per head (m of random features, a window's width,
    Linformer's k), what a training config's ``attention.num_features`` sets and a sweep over m varies; None: none.
    """

    SIZE: ClassVar[str | None] = None

    num_heads: int | None = None

    def __post_init__(self):
        check_int(self, "num_heads", optional=True)

    def size(self) -> int | None:
        """The value of the :attr:`SIZE` option where it changes what the kind computes, else None."""
        return None if self.SIZE is None else getattr(self, self.SIZE)

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        """Refuses (``InputError``, naming ``site``) what the kind cannot run at a site: ``causal`` masked
        self-attention, ``stateful`` decoded from a state (self-attention token by token, or cross-attention to a
        prepared memory). The base refuses nothing."""

    def for_state(self, head_dim: int) -> KindOptions:
        """The options at a site decoded from a state (:meth:`check_site`'s ``stateful``), where nothing can be fitted
        to the whole sequence: a training config's rule for decoder sites. The base's are the same options."""
        return self


@dataclasses.dataclass(frozen=True)
class AttentionKind:
    """One attention kind: what the module docstring lists.

    Example:
      >>> attention_kind("softmax").cache, attention_kind("kernelized").cache, attention_kind("linformer").cache
      ('length', 'fixed', None)
    """

    name: str
    options: type
    layer: Callable
    causal: bool
    bidirectional: bool
    cross: bool
    cache: str | None
    dense_masks: bool = False
    summary: str = ""

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise InputError(f"an attention kind's name must be an identifier, got {self.name!r}.")
        if not (isinstance(self.options, type) and issubclass(self.options, KindOptions)):
            raise InputTypeError(f"{self.name}: options must be a subclass of KindOptions, got {self.options!r}.")
        if self.cache not in CACHES and not (self.cache is None and not self.causal):
            raise InputError(
                f"{self.name}: cache must be one of {list(CACHES)} for a kind that runs causally (None: it never "
                f"decodes), got {self.cache!r}."
            )

    @property
    def causal_only(self) -> bool:
        """It runs masked self-attention only (the delta rule): no encoder, no cross-attention."""
        return self.causal and not (self.bidirectional or self.cross)

    def runs(self, role: str) -> bool:
        """Whether the kind runs a site of ``role``: ``"causal"``, ``"bidirectional"`` or ``"cross"``."""
        return getattr(self, role)


_KINDS: dict[str, AttentionKind] = {}
_VARIANTS: dict[str, tuple[str | None, dict, tuple[str, ...]]] = {}
_VARIANT_FAMILIES: list[Callable[[], dict[str, tuple[str, dict]]]] = []


def register_attention_kind(kind: AttentionKind, *, replace: bool = False) -> AttentionKind:
    """Adds ``kind`` to the registry (a variant of its own name too); a second kind of the same name raises unless
    ``replace``. Returns ``kind``."""
    if not isinstance(kind, AttentionKind):
        raise InputTypeError(f"register_attention_kind takes an AttentionKind, got {kind!r}.")
    if kind.name in _KINDS and not replace:
        raise InputError(f"attention kind {kind.name!r} is registered already (replace=True to replace it).")
    _KINDS[kind.name] = kind
    return kind


def registered_attention_kinds() -> tuple[str, ...]:
    """Every registered kind's name, in the order of registration."""
    return tuple(_KINDS)


def attention_kind(name: str) -> AttentionKind:
    """The registered kind ``name``.

    Example:
      >>> attention_kind("kernelized").options.__name__
      'KernelizedOptions'
    """
    if isinstance(name, str) and name in _KINDS:
        return _KINDS[name]
    raise InputError(
        f"attention kind must be one of {list(_KINDS)}, got {name!r}. Register your own with "
        "rfa.layers.register_attention_kind; from a command, in a module listed in config.modules."
    )


def register_variant(name: str, kind: str | None = None, *, layers: tuple[str, ...] = (), **options) -> None:
    """Names a setting of a kind (``register_variant("gla", "kernelized", estimator="elu", gated=True,
    gate="feature")``), or with ``layers`` a hybrid stack: a pattern of variants, cycled over a model's layers.
    ``options`` are the kind's (checked when a site is made of the variant)."""
    if not (isinstance(name, str) and name.isidentifier()):
        raise InputError(f"a variant's name must be an identifier, got {name!r}.")
    if (kind is None) == (not layers):
        raise InputError(f"variant {name!r}: give a kind or layers (a stack of variants), not both.")
    if name in _VARIANTS:
        raise InputError(f"variant {name!r} is registered already.")
    _VARIANTS[name] = (kind, dict(options), tuple(layers))


def register_variant_family(family: Callable[[], dict[str, tuple[str, dict]]]) -> None:
    """Variants made on demand: ``family()`` is ``{name: (kind, options)}`` (kernelized attention's: one variant per
    registered estimator, so an estimator registered later is a variant too)."""
    _VARIANT_FAMILIES.append(family)


def _family_variants() -> dict[str, tuple[str, dict, tuple[str, ...]]]:
    found = {}
    for family in _VARIANT_FAMILIES:
        found.update({name: (kind, options, ()) for name, (kind, options) in family().items()})
    return found


def registered_variants() -> tuple[str, ...]:
    """The names of every variant: the named settings, the families' (an estimator's name is kernelized attention
    with it), then every kind under its own name, but a kind that a variant already gives with its default options
    (``"exact"`` is ``"softmax"``, ``"positive"`` is ``"kernelized"``)."""
    every = {**_family_variants(), **_VARIANTS}
    aliased = {  # a kind whose default options a variant gives: its name would be a second name of that variant
        kind
        for kind, options, _ in every.values()
        if kind in _KINDS and _KINDS[kind].options(**options) == _KINDS[kind].options()
    }
    kinds = tuple(k for k in _KINDS if k not in every and k not in aliased)
    return tuple(_VARIANTS) + tuple(n for n in every if n not in _VARIANTS) + kinds


def variant(name: str) -> tuple[str | None, dict, tuple[str, ...]]:
    """``(kind, options, layers)`` of a variant: a kind and its options, or (None, {}, the stack's variants).

    Example:
      >>> variant("gla")
      ('kernelized', {'estimator': 'elu', 'gated': True, 'gate': 'feature'}, ())
      >>> variant("positive"), variant("deltanet")
      (('kernelized', {'estimator': 'positive'}, ()), ('deltanet', {}, ()))
    """
    if name in _VARIANTS:
        return _VARIANTS[name]
    family = _family_variants()
    if name in family:
        return family[name]
    if name in _KINDS:
        return name, {}, ()
    raise InputError(
        f"attention must be a kind or a variant, one of {sorted(registered_variants())}, got {name!r}. Register your "
        "own kind with rfa.layers.register_attention_kind, or an estimator with rfa.register_estimator; from a "
        "command, in a module listed in config.modules."
    )
