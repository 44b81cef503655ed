"""The sweep of an MSE experiment: its config schema and checks, its cells, and the workdir store.

A config (``configs/<name>.py``) declares a sweep; :func:`cells` expands it into cells, one per
point of the sweep (estimator x projection kind x m x geometry point, or x input scale for the
attention experiment). :class:`ResultStore` keeps one JSON file per finished cell in
``<workdir>/cells``, each written atomically, so a re-run skips what is done and a killed run
loses no finished cell; it refuses a workdir that holds a different config.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import zlib

import ml_collections

import rfa
from rfa.workdir import ConfigError, record_config, write_atomic

EXPERIMENTS = ("kernel_mse", "attention_error", "estimator_fit")
DATASETS = ("anisotropic", "trained_model")  # the query/key sets of estimator_fit


GEOMETRIES = ("norm_angle",)
# Execution settings: they bound memory and never change a result, so a resumed run may change them.
EXECUTION_FIELDS = ("batch_elements", "data_dir")


def base_config(experiment: str) -> ml_collections.ConfigDict:
    """The fields every config of ``experiment`` sets; configs fill in the values."""
    config = ml_collections.ConfigDict()
    config.name = ""  # reproduction name: selects the figures and published values of the report
    config.experiment = experiment  # "kernel_mse" (estimates of SM(x, y)) or "attention_error"
    config.modules = ()  # Python modules imported first: they register your own estimators (rfa.register_feature_map)
    config.estimators = ()  # registered estimator (feature-map) names
    config.feature_params = ml_collections.ConfigDict()  # fixed parameters per estimator, e.g. {"gerf": {"A": -0.1}}
    config.projections = ("iid",)  # projection kinds: "iid", "orthogonal", "simplex"
    config.num_features = ()  # the sweep over m, the number of random vectors
    config.dim = 16  # d, the input dimension
    config.seed = 0  # every random draw derives from this seed and the cell's parameters
    config.batch_elements = 2**22  # largest number of feature values held in memory at once
    if experiment == "kernel_mse":
        config.repetitions = 1000  # independent projections per cell (Monte Carlo repetitions)
        config.max_relative_error = 0.0  # skip Monte Carlo where its predicted relative error exceeds this (0: never)
        config.geometry = ml_collections.ConfigDict()
        config.geometry.kind = "norm_angle"  # x = l e1, y = l (cos t e1 + sin t e2): |x| = |y| = l at angle t
        config.geometry.norms = ()  # the lengths l
        config.geometry.angles = ()  # the angles t in degrees
    elif experiment == "attention_error":
        config.length = 4096  # L, sequence length (queries = keys = values)
        config.input_scales = ()  # s: entries of q and k are N(0, s²), v is N(0, 1)
        config.num_seeds = 15  # independent inputs and projections per cell
    elif experiment == "estimator_fit":
        config.datasets = ()  # query/key sets: "anisotropic" (synthetic), "trained_model" (an attention layer's)
        config.num_vectors = 256  # queries and keys per set (per head for the model)
        config.input_scale = 0.5  # s: the synthetic sets' largest standard deviation per coordinate
        config.anisotropy = 8.0  # ratio of the largest to the smallest standard deviation (synthetic)
        config.pairs_checked = 8  # pairs per cell whose variance Monte Carlo checks
        config.repetitions = 20000  # Monte Carlo draws per checked pair
        config.model = ml_collections.ConfigDict()
        config.model.config = "configs/sort.py:exact"  # the training config of the trained_model set
        config.model.num_train_steps = 300
        config.model.layer = 0  # encoder layer whose self-attention queries and keys are taken
        config.data_dir = "data"  # TFDS data_dir of the model's task
    else:
        raise ConfigError(f"experiment must be one of {list(EXPERIMENTS)}, got {experiment!r}.")
    return config


def _check_sequence(values, field, check_item, what):
    values = tuple(values)
    if not values:
        raise ConfigError(f"config.{field} is empty: the sweep needs at least one {what}.")
    for value in values:
        check_item(value, f"config.{field}")
    if len(set(values)) != len(values):
        raise ConfigError(f"config.{field} lists a value twice: {list(values)}.")
    return values


def import_modules(config: ml_collections.ConfigDict) -> None:
    """Imports ``config.modules``, whose import registers the user's estimators."""
    for name in config.modules:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"config.modules: cannot import {name!r}: {error}") from error


def check_estimator(config: ml_collections.ConfigDict, name: str) -> None:
    """Raises ``ConfigError`` unless the experiment can run estimator ``name`` with the config's parameters."""
    if name not in rfa.registered_feature_maps():
        raise ConfigError(
            f"config.estimators has unknown estimator {name!r}; registered: {list(rfa.registered_feature_maps())}. "
            "Register your own with rfa.register_feature_map in a module listed in config.modules."
        )
    fm = rfa.feature_map(name)
    if config.experiment == "kernel_mse" and fm.kernel is None:
        raise ConfigError(
            f"config.estimators: {name!r} estimates no kernel (Estimator.kernel is None), so it has no kernel "
            "MSE; compare it in the attention_error experiment."
        )
    if config.experiment == "attention_error" and fm.kernel not in ("softmax", None):
        raise ConfigError(
            f"config.estimators: {name!r} estimates the {fm.kernel} kernel; attention_error compares against "
            "softmax attention, so it needs a softmax-kernel estimator or a deterministic map."
        )
    if config.experiment == "estimator_fit" and (fm.kernel != "softmax" or fm.theory is None):
        raise ConfigError(
            f"config.estimators: {name!r} needs a closed-form variance of the softmax kernel for estimator_fit."
        )
    params = dict(config.feature_params.get(name, {}))
    try:
        fm.check_params(params)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"config.feature_params.{name}: {error}") from error
    missing = set(fm.required) - set(params) - set(fm.fitted) - set(fm.sampled)
    if missing:
        raise ConfigError(f"config.feature_params.{name} must give {sorted(missing)}, which {name!r} requires.")


def _check_positive_int(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{field} must hold integers >= 1, got {value!r}.")


def _check_positive(value, field):
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{field} must hold numbers > 0, got {value!r}.")


def _check_number(value, field):
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{field} must hold finite numbers, got {value!r}.")


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raises ``ConfigError`` (a ``ValueError``) naming the field of the first invalid setting of ``config``."""
    if config.experiment not in EXPERIMENTS:
        raise ConfigError(f"config.experiment must be one of {list(EXPERIMENTS)}, got {config.experiment!r}.")
    if not config.name:
        raise ConfigError("config.name is empty: name the reproduction (it names the report and figures).")
    import_modules(config)
    _check_sequence(config.estimators, "estimators", lambda name, field: check_estimator(config, name), "estimator")
    unused = set(config.feature_params) - set(config.estimators)
    if unused:
        raise ConfigError(f"config.feature_params names {sorted(unused)}, which config.estimators does not list.")
    _check_sequence(config.projections, "projections", _check_projection, "projection kind")
    _check_sequence(config.num_features, "num_features", _check_positive_int, "m")
    for field in ("dim", "batch_elements"):
        _check_positive_int(config[field], f"config.{field}")
    if config.experiment == "kernel_mse":
        _check_positive_int(config.repetitions, "config.repetitions")
        if config.repetitions < 2:
            raise ConfigError(f"config.repetitions must be >= 2 for a standard error, got {config.repetitions}.")
        if config.geometry.kind not in GEOMETRIES:
            raise ConfigError(f"config.geometry.kind must be one of {list(GEOMETRIES)}, got {config.geometry.kind!r}.")
        _check_sequence(config.geometry.norms, "geometry.norms", _check_positive, "norm")
        _check_sequence(config.geometry.angles, "geometry.angles", _check_number, "angle")
        if not config.max_relative_error >= 0:
            value = config.max_relative_error
            raise ConfigError(f"config.max_relative_error must be >= 0 (0: never skip), got {value}.")
        if config.dim < 2:
            raise ConfigError(f"config.dim must be >= 2 to place two vectors at an angle, got {config.dim}.")
    elif config.experiment == "attention_error":
        _check_positive_int(config.length, "config.length")
        _check_positive_int(config.num_seeds, "config.num_seeds")
        _check_sequence(config.input_scales, "input_scales", _check_positive, "input scale")
    else:
        _check_sequence(config.datasets, "datasets", _check_dataset, "dataset")
        for field in ("num_vectors", "pairs_checked", "repetitions"):
            _check_positive_int(config[field], f"config.{field}")
        _check_positive_int(config.model.num_train_steps, "config.model.num_train_steps")
        if config.num_vectors < 2 or config.repetitions < 2:
            raise ConfigError("config.num_vectors and config.repetitions must be >= 2 (a fit and a standard error).")
        _check_positive(config.input_scale, "config.input_scale")
        _check_positive(config.anisotropy, "config.anisotropy")
        if config.num_features != (1,) or config.projections != ("iid",):
            raise ConfigError("estimator_fit compares per-vector variances: num_features=(1,), projections=('iid',).")


def _check_dataset(name, field):
    if name not in DATASETS:
        raise ConfigError(f"{field} has unknown dataset {name!r}; use one of {list(DATASETS)}.")


def _check_projection(kind, field):
    if kind not in rfa.random_features.projections.PROJECTION_KINDS:
        kinds = list(rfa.random_features.projections.PROJECTION_KINDS)
        raise ConfigError(f"{field} has unknown projection kind {kind!r}; use one of {kinds}.")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the sweep. ``point`` holds the geometry (norm, angle) or the input scale."""

    estimator: str
    projection: str
    num_features: int
    point: tuple[tuple[str, float], ...]

    @property
    def group(self) -> tuple[str, str, int]:
        """Cells of one group share their random projections and are computed together."""
        return self.estimator, self.projection, self.num_features

    @property
    def name(self) -> str:
        point = "_".join(f"{key}{value:.10g}" for key, value in self.point)
        return f"{self.estimator}_{self.projection}_m{self.num_features}_{point}"

    def labels(self) -> dict:
        return {"estimator": self.estimator, "projection": self.projection, "m": self.num_features, **dict(self.point)}


def cells(config: ml_collections.ConfigDict) -> list[Cell]:
    """All cells of the sweep, grouped by (estimator, projection, m)."""
    if config.experiment == "kernel_mse":
        geometry = config.geometry
        points = [(("norm", float(n)), ("angle", float(a))) for n in geometry.norms for a in geometry.angles]
    elif config.experiment == "attention_error":
        points = [(("input_scale", float(s)),) for s in config.input_scales]
    else:
        points = [(("dataset", float(DATASETS.index(name))),) for name in config.datasets]
    return [
        Cell(estimator, projection, m, point)
        for estimator in config.estimators
        for projection in config.projections
        for m in config.num_features
        for point in points
    ]


def group_seed(seed: int, group: tuple) -> int:
    """A stable 31-bit seed for a cell group (``hash`` is salted per process; crc32 is not)."""
    return zlib.crc32(repr((seed, *group)).encode()) & 0x7FFFFFFF


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ResultStore:
    """Finished cells of one workdir, one atomically written JSON file each.

    Creating the store records the config in ``<workdir>/config.json``; a workdir that already
    holds a config differing in any result-changing field raises ``ConfigError`` listing the
    differences, and nothing in it is touched. One run per workdir at a time.
    """

    def __init__(self, workdir: str, config: ml_collections.ConfigDict):
        self.workdir = workdir
        self.cell_dir = os.path.join(workdir, "cells")
        record_config(workdir, config, execution_fields=EXECUTION_FIELDS)
        os.makedirs(self.cell_dir, exist_ok=True)
        for name in os.listdir(self.cell_dir):
            if ".tmp" in name and not _process_alive(int(name.rsplit(".tmp", 1)[1])):
                os.remove(os.path.join(self.cell_dir, name))  # a cell a killed run was writing: never finished

    def _path(self, cell: Cell) -> str:
        return os.path.join(self.cell_dir, f"{cell.name}.json")

    def done(self, cell: Cell) -> bool:
        return os.path.exists(self._path(cell))

    def save(self, cell: Cell, record: dict) -> None:
        write_atomic(self._path(cell), json.dumps({**cell.labels(), **record}, allow_nan=True) + "\n")

    def load(self, cell: Cell) -> dict:
        with open(self._path(cell)) as f:
            return json.load(f)
