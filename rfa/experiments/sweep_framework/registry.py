"""The one registry of sweeps: experiment kinds and reproductions, each one entry.

An :class:`ExperimentKind` is what a sweep measures (its checks, its points, its measurement of a cell group,
its generic analysis); a :class:`Reproduction` is a published comparison: the experiment kind it sweeps,
its analysis (figures, report sections, verdict), what its sweep must hold, and the module of its config.
:func:`analyze` picks a sweep's analysis by ``config.name``; a sweep of another name gets its kind's.

Each shipped kind and reproduction registers itself when its module is imported, and importing the package
:mod:`rfa.experiments.sweeps` imports them all. The framework imports none of them, so the registry sits below every
sweep in the import graph; a command that runs shipped sweeps imports :mod:`rfa.experiments.sweeps` first.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import ml_collections

from rfa.experiments.common.report import Analysis
from rfa.workdir import ConfigError

AnalyzeFn = Callable[[ml_collections.ConfigDict, list[dict], str], Analysis]


@dataclasses.dataclass(frozen=True)
class ExperimentKind:
    """What one kind of sweep measures.

    Attributes:
      name: ``config.experiment``.
      check: raises ``ConfigError`` for an invalid field of the kind's own (``config.repetitions``, ...).
      check_estimator: ``(config, estimator)`` raises ``ConfigError`` for an estimator the kind cannot measure.
      points: the sweep points of a config, each a tuple of ``(name, float)`` (a norm and an angle, ...).
      measure: ``(config, cell_group, context, done) -> iterator of (cell, record)`` for a group of cells of one
        ``(estimator, projection, m)`` not ``done``.
      analyze: the generic analysis of its records (figures, sections; usually no verdict).
      context: ``(config, workdir) -> shared inputs`` made once per run and passed to every ``measure``.
    """

    name: str
    check: Callable[[ml_collections.ConfigDict], None]
    check_estimator: Callable[[ml_collections.ConfigDict, Any], None]
    points: Callable[[ml_collections.ConfigDict], list[tuple]]
    measure: Callable[..., Iterator[tuple[Any, dict]]]
    analyze: AnalyzeFn
    context: Callable[[ml_collections.ConfigDict, str], Any] = lambda config, workdir: None


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """A published comparison that a sweep reproduces.

    Attributes:
      name: ``config.name`` of its sweeps (and, by default, its config ``rfa/configs/sweeps/<name>.py``).
      experiment: the experiment kind it sweeps.
      analyze: its analysis: figures in the workdir, report sections and a
        :class:`rfa.experiments.common.report.Verdict`.
      requirements: config field -> values the sweep must hold for the published comparison (a sweep overridden
        without them gets its kind's analysis and a "not reproduced" verdict).
      config: the module whose ``get_config(variant)`` gives its sweep (default ``rfa.configs.sweeps.<name>``).
    """

    name: str
    experiment: str
    analyze: AnalyzeFn
    requirements: dict[str, set] = dataclasses.field(default_factory=dict)
    config: str | None = None

    def get_config(self, variant: str) -> ml_collections.ConfigDict:
        """Its sweep config in ``variant`` (``"quick"``, ``"full"``)."""
        return importlib.import_module(self.config or f"rfa.configs.sweeps.{self.name}").get_config(variant)


_KINDS: dict[str, ExperimentKind] = {}
_REPRODUCTIONS: dict[str, Reproduction] = {}


def register_experiment_kind(kind: ExperimentKind) -> ExperimentKind:
    if kind.name in _KINDS:
        raise ValueError(f"an experiment kind named {kind.name!r} is already registered.")
    _KINDS[kind.name] = kind
    return kind


def experiment_kind(name: str) -> ExperimentKind:
    """The registered experiment kind ``name`` (a ``ConfigError`` naming the known ones otherwise)."""
    if name not in _KINDS:
        raise ConfigError(f"config.experiment must be one of {sorted(_KINDS)}, got {name!r}.")
    return _KINDS[name]


def register_reproduction(reproduction: Reproduction) -> Reproduction:
    """Adds a reproduction (its experiment kind must be registered). Another reproduction of an existing name is an
    error; the same definition again replaces it: a user's module runs twice when ``rfa sweep --config
    my_reproduction.py`` loads it as a config file and its report imports it by name."""
    if reproduction.experiment not in _KINDS:
        experiment_kind(reproduction.experiment)  # an error naming the registered kinds
    existing = _REPRODUCTIONS.get(reproduction.name)
    if existing is not None and _definition(existing) != _definition(reproduction):
        raise ValueError(f"a reproduction named {reproduction.name!r} is already registered.")
    _REPRODUCTIONS[reproduction.name] = reproduction
    return reproduction


def _definition(reproduction: Reproduction) -> tuple:
    """What makes two registrations one reproduction: its fields, its analysis named by source file and name."""
    code = getattr(reproduction.analyze, "__code__", None)
    source = os.path.realpath(code.co_filename) if code else None  # a config file's path may be relative
    return reproduction.experiment, reproduction.requirements, reproduction.config, source, code and code.co_name


def reproduction(name: str) -> Reproduction:
    if name not in _REPRODUCTIONS:
        raise ConfigError(f"unknown reproduction {name!r}; registered: {sorted(_REPRODUCTIONS)}.")
    return _REPRODUCTIONS[name]


def registered_reproductions() -> tuple[str, ...]:
    """The names of the registered reproductions, in registration order."""
    return tuple(_REPRODUCTIONS)


def analyze(config: ml_collections.ConfigDict, records: list[dict], workdir: str) -> Analysis:
    """Writes the figures of ``config``'s reproduction into ``workdir``; returns its report sections and verdict.

    A sweep whose name is no reproduction gets the generic analysis of its experiment kind. A verdict against
    published values belongs to the published configuration only: a reproduction's sweep that differs from each of
    its shipped variants (``quick``, ``full``) in a field that changes what is measured — estimators, feature
    counts, geometry, repetitions; not the seed, batching or modules — is a custom sweep. It gets the generic
    analysis, a first section saying so (and naming what the published comparison needs, where the sweep lacks
    it), and no verdict.
    """
    generic = experiment_kind(config.experiment).analyze
    if config.name not in _REPRODUCTIONS:
        return generic(config, records, workdir)
    found = _REPRODUCTIONS[config.name]
    changed = custom_fields(config, found)
    if not changed:
        return found.analyze(config, records, workdir)
    missing = {
        field: sorted(needed - set(config[field]))
        for field, needed in found.requirements.items()
        if needed - set(config[field])
    }
    note = (
        f"**Custom sweep of {config.name}, no verdict**: it differs from the shipped configurations in "
        f"{', '.join(changed)}, and a verdict against the published values belongs to the published configuration "
        "only. The generic analysis of its measurements follows."
    )
    if missing:
        note += f" The published comparison of {config.name} also needs {missing} in the sweep."
    return Analysis(None, [note, *generic(config, records, workdir).sections])


NOT_MEASURED = ("seed", "batch_elements", "modules", "data_dir")
"""Config fields that change how a sweep runs, not what it measures."""


def custom_fields(config: ml_collections.ConfigDict, found: Reproduction) -> list[str]:
    """The fields (dotted) in which ``config`` differs from the closest shipped variant of ``found``; empty for a
    shipped configuration, however seeded, batched or extended with modules (:data:`NOT_MEASURED`).

    Example:
      >>> config = reproduction("performer_lemma2").get_config("quick")
      >>> config.seed, config.repetitions = 7, 10
      >>> custom_fields(config, reproduction("performer_lemma2"))
      ['repetitions']
    """
    flat = _flatten(config.to_dict())
    differences = []
    for variant in ("quick", "full"):
        shipped = _flatten(found.get_config(variant).to_dict())
        differences.append(
            sorted(
                field
                for field in flat.keys() | shipped.keys()
                if field not in NOT_MEASURED and flat.get(field) != shipped.get(field)
            )
        )
    return min(differences, key=len)


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= _flatten(value, f"{prefix}{key}.")
        else:
            flat[prefix + key] = tuple(value) if isinstance(value, list | tuple) else value
    return flat
