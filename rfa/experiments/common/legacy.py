"""The 0.2 module names, kept for one release: ``experiments.*`` and ``configs.*`` (top-level packages of a checkout
then) answer as the ``rfa.experiments.*`` and ``rfa.configs.*`` modules they became, so ``python -m
experiments.train`` and ``from configs.common import task_config`` still work from a checkout, with a
``DeprecationWarning``. A checkout's ``experiments/__init__.py`` and ``configs/__init__.py`` call :func:`alias`;
nothing of this ships in the wheel but this module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from rfa import configs

RENAMED = {  # 0.2 module -> the module it became
    "experiments.mse": "rfa.experiments.sweep",
    "experiments.cli": "rfa.experiments.common.cli",
    "experiments.report": "rfa.experiments.common.report",
    "experiments.spread": "rfa.experiments.common.spread",
    "experiments.styles": "rfa.experiments.common.styles",
    "experiments.benchmarks.common": "rfa.experiments.common.timing",
    "experiments.studies.seeded": "rfa.experiments.common.seeded",
    "experiments.sweeps.catalog": "rfa.experiments.sweeps",
    "experiments.sweeps.checks": "rfa.experiments.sweep_framework.config_checks",
    "experiments.sweeps.cells": "rfa.experiments.sweep_framework.cells",
    "experiments.sweeps.registry": "rfa.experiments.sweep_framework.registry",
    "experiments.sweeps.runner": "rfa.experiments.sweep_framework.runner",
    "experiments.studies.associative_recall": "rfa.experiments.studies.recall",
    "experiments.studies.lengths": "rfa.experiments.studies.length_generalization",
    "experiments.studies.distill": "rfa.experiments.studies.distillation",
    "experiments.studies.forecast": "rfa.experiments.studies.forecasting",
    "experiments.studies.estimators": "rfa.experiments.studies.estimators_in_models",
    "experiments.studies.estimators_in_models": "rfa.experiments.studies.estimators_in_models.measure",
    "experiments.studies.estimators_in_models_report": "rfa.experiments.studies.estimators_in_models.report",
    "experiments.studies.estimator_models": "rfa.experiments.studies.estimators_in_models.models",
    "experiments.studies.flax_encoder": "rfa.experiments.studies.estimators_in_models.flax_encoder",
    "experiments.studies.qk_scale": "rfa.experiments.studies.estimators_in_models.qk_scale",
}


def new_name(old: str) -> str:
    """The module that the 0.2 module ``old`` became.

    Example:
      >>> new_name("experiments.mse"), new_name("experiments.sweeps.runner"), new_name("configs.sort")
      ('rfa.experiments.sweep', 'rfa.experiments.sweep_framework.runner', 'rfa.configs.tasks.sort')
    """
    parts = old.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RENAMED:
            return ".".join([RENAMED[prefix], *parts[n:]])
    if parts[0] == "configs" and len(parts) > 1 and parts[1] != "common":
        found = configs.find(configs.RENAMED.get(parts[1], parts[1]))
        if found is not None:
            return ".".join([found, *parts[2:]])
    return "rfa." + old


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new one (the same module object: one registry, one set of flags)."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass

    def get_code(self, fullname):  # what `python -m <old name>` runs
        del fullname
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)

    def is_package(self, fullname):
        del fullname
        return importlib.util.find_spec(self.target).submodule_search_locations is not None


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str):
        self.package = package

    def find_spec(self, fullname, path=None, target=None):
        del path, target
        if not fullname.startswith(self.package + "."):
            return None
        new = new_name(fullname)
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, _Alias(new), origin=found.origin)
        if found.submodule_search_locations is not None:
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


def alias(package: str) -> None:
    """Makes ``package.*`` (``"experiments"`` or ``"configs"``) answer as the modules they became, with a warning."""
    warnings.warn(
        f"`{package}.*` is `rfa.{package}.*` since rfa 0.3 (commands: `rfa --help`); the old name goes in 0.4",
        DeprecationWarning,
        stacklevel=3,
    )
    if not any(isinstance(finder, _Finder) and finder.package == package for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder(package))
