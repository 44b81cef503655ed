"""The checks of a sweep config: the fields every sweep has, then its experiment kind's own.

Each check raises ``ConfigError`` (a ``ValueError``) naming the field of the first invalid setting.
"""

from __future__ import annotations

import math

import ml_collections

import rfa
from rfa.experiments.sweep_framework.registry import experiment_kind
from rfa.random_features.projections import PROJECTION_KINDS
from rfa.workdir import ConfigError, import_modules


def sequence(values, field, check_item, what):
    """The values of a sweep field, checked: not empty, each valid (``check_item(value, field)``), none twice."""
    values = tuple(values)
    if not values:
        raise ConfigError(f"config.{field} is empty: the sweep needs at least one {what}.")
    for value in values:
        check_item(value, f"config.{field}")
    if len(set(values)) != len(values):
        raise ConfigError(f"config.{field} lists a value twice: {list(values)}.")
    return values


def positive_int(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{field} must hold integers >= 1, got {value!r}.")


def positive(value, field):
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{field} must hold numbers > 0, got {value!r}.")


def finite(value, field):
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{field} must hold finite numbers, got {value!r}.")


def check_estimator(config: ml_collections.ConfigDict, name: str) -> None:
    """Raises ``ConfigError`` unless the experiment can run estimator ``name`` with the config's parameters."""
    if name not in rfa.registered_estimators():
        raise ConfigError(
            f"config.estimators has unknown estimator {name!r}; registered: {list(rfa.registered_estimators())}. "
            "Register your own with rfa.register_estimator in a module listed in config.modules."
        )
    fm = rfa.estimator(name)
    experiment_kind(config.experiment).check_estimator(config, fm)
    params = dict(config.feature_params.get(name, {}))
    try:
        fm.check_params(params)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"config.feature_params.{name}: {error}") from error
    missing = set(fm.required) - set(params) - set(fm.fitted) - set(fm.sampled)
    if missing:
        raise ConfigError(f"config.feature_params.{name} must give {sorted(missing)}, which {name!r} requires.")


def _projection(kind, field):
    if kind not in PROJECTION_KINDS:
        raise ConfigError(f"{field} has unknown projection kind {kind!r}; use one of {list(PROJECTION_KINDS)}.")


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raises ``ConfigError`` naming the field of the first invalid setting of ``config``."""
    if not config.name:
        raise ConfigError("config.name is empty: name the reproduction (it names the report and figures).")
    import_modules(config.modules)  # first: they may register the estimators, the reproduction, even the kind
    kind = experiment_kind(config.experiment)
    sequence(config.estimators, "estimators", lambda name, field: check_estimator(config, name), "estimator")
    unused = set(config.feature_params) - set(config.estimators)
    if unused:
        raise ConfigError(f"config.feature_params names {sorted(unused)}, which config.estimators does not list.")
    sequence(config.projections, "projections", _projection, "projection kind")
    sequence(config.num_features, "num_features", positive_int, "m")
    for field in ("dim", "batch_elements"):
        positive_int(config[field], f"config.{field}")
    kind.check(config)
