"""The cells of a sweep and the workdir store of finished ones.

:func:`cells` expands a config into cells, one per point of the sweep (estimator x projection kind x m x the
experiment kind's points). :class:`ResultStore` keeps one JSON file per finished cell in ``<workdir>/cells``,
each written atomically, so a re-run skips what is done and a killed run loses no finished cell; it refuses a
workdir that holds a different config.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib

import ml_collections

from rfa.experiments.sweep_framework.registry import experiment_kind
from rfa.workdir import record_config, write_atomic

# Execution settings: they bound memory and never change a result, so a resumed run may change them.
EXECUTION_FIELDS = ("batch_elements", "data_dir")


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
    points = experiment_kind(config.experiment).points(config)
    return [
        Cell(estimator, projection, m, point)
        for estimator in config.estimators
        for projection in config.projections
        for m in config.num_features
        for point in points
    ]


def estimator_params(config: ml_collections.ConfigDict, estimator: str) -> dict:
    """The fixed parameters ``config.feature_params[estimator]`` of ``estimator`` (empty if none)."""
    return dict(config.feature_params.get(estimator, {}))


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
