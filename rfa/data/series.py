"""Time series that ship inside statsmodels, as TFDS datasets with chronological splits; forecasting windows.

- ``series/co2``: weekly atmospheric CO₂ at Mauna Loa, March 1958 - December 2001, 2,284 weeks
  (``statsmodels.datasets.co2``); its 59 missing weeks are filled by linear interpolation between the
  neighbouring observed weeks (``filled`` marks them). Season: 52 weeks.
- ``series/sunspots``: yearly sunspot numbers 1700-2008, 309 years (``statsmodels.datasets.sunspots``).
  Season: 11 years (the solar cycle).

Splits are chronological: the first 70% of the points are ``train``, the next 15% ``validation``, the
last 15% ``test``. Each split is one example holding the series from its beginning up to the split's
end (``values [T, channels]``) and ``start``, the first point that belongs to the split: a window whose
targets lie in the split may look back into earlier splits (the past), never into later ones.
Normalisation statistics come from the ``train`` split alone (:func:`normalization`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds

from rfa.data.generated import PreparedLocally

SPLITS = {"train": 0.70, "validation": 0.15, "test": 0.15}


def _co2() -> tuple[np.ndarray, np.ndarray]:
    import statsmodels.api as sm  # imported when preparing only

    values = sm.datasets.co2.load_pandas().data["co2"].to_numpy(np.float64, copy=True)
    missing = np.isnan(values)
    steps = np.arange(len(values))
    values[missing] = np.interp(steps[missing], steps[~missing], values[~missing])
    return values[:, None], missing


def _sunspots() -> tuple[np.ndarray, np.ndarray]:
    import statsmodels.api as sm

    values = sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(np.float64)
    return values[:, None], np.zeros(len(values), bool)


@dataclasses.dataclass
class SeriesConfig(tfds.core.BuilderConfig):
    """Which series, and its season (for the seasonal-naive baseline)."""

    season: int = 1


LOADERS = {"co2": _co2, "sunspots": _sunspots}


class Series(PreparedLocally, tfds.core.GeneratorBasedBuilder):
    """``tfds.data_source("series/co2")`` or ``"series/sunspots"``: one example per split (see the module)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS: ClassVar[list] = [
        SeriesConfig(name="co2", description="Weekly CO2 at Mauna Loa, 1958-2001 (gaps interpolated).", season=52),
        SeriesConfig(name="sunspots", description="Yearly sunspot numbers, 1700-2008.", season=11),
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "values": tfds.features.Tensor(shape=(None, 1), dtype=np.float32),
                    "filled": tfds.features.Tensor(shape=(None,), dtype=np.bool_),
                    "start": np.int64,
                }
            ),
        )

    def _split_generators(self, dl_manager):
        values, filled = LOADERS[self.builder_config.name]()
        ends = np.round(np.cumsum(list(SPLITS.values())) * len(values)).astype(int)
        starts = np.concatenate([[0], ends[:-1]])
        return {
            name: self._generate_examples(values[:end], filled[:end], start)
            for name, start, end in zip(SPLITS, starts, ends, strict=True)
        }

    def _generate_examples(self, values: np.ndarray, filled: np.ndarray, start: int):
        yield 0, {"values": values.astype(np.float32), "filled": filled, "start": int(start)}


def check_series(values, name: str = "series") -> np.ndarray:
    """``values [T, channels]`` as float64, or a ValueError naming the first NaN (time step and channel)."""
    values = np.asarray(values, np.float64)
    if values.ndim != 2:
        raise ValueError(f"{name} must have shape [time, channels], got {values.shape}.")
    bad = np.argwhere(~np.isfinite(values))
    if len(bad):
        step, channel = bad[0]
        raise ValueError(
            f"{name} has {len(bad)} non-finite values, the first at time step {step} (channel {channel}): fill or "
            "drop them before forecasting (rfa's builders interpolate the gaps they ship)."
        )
    return values


def window_starts(length: int, lookback: int, horizon: int, start: int) -> np.ndarray:
    """The first index of every window ``[s, s + lookback + horizon)`` of a series of ``length`` points whose
    targets (the last ``horizon`` points) begin at or after ``start``.

    Example:
      >>> window_starts(10, lookback=4, horizon=2, start=6)
      array([2, 3, 4])
    """
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 1:
        raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}.")
    if lookback + horizon > length:
        raise ValueError(
            f"lookback + horizon = {lookback} + {horizon} is longer than the series ({length} points): shorten the "
            "lookback or the horizon."
        )
    first = max(0, start - lookback)
    return np.arange(first, length - lookback - horizon + 1)


def normalization(train_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of the training split's points (the only statistics used)."""
    train_values = check_series(train_values, "the training split")
    return train_values.mean(axis=0), np.maximum(train_values.std(axis=0), 1e-8)


def seasonal_naive(inputs: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Forecasts ``[..., horizon, C]`` repeating the last observed season of ``inputs [..., lookback, C]``:
    step j after the lookback gets the value ``season · ceil((j + 1) / season)`` steps before it.

    Example:
      >>> seasonal_naive(np.arange(6.0)[:, None], horizon=3, season=2)[:, 0]
      array([4., 5., 4.])
    """
    lookback = inputs.shape[-2]
    steps = np.arange(horizon)
    back = season * np.ceil((steps + 1) / season).astype(int) - steps  # how far before the lookback's end
    if back.max() > lookback:
        raise ValueError(
            f"the seasonal-naive forecast needs a lookback of at least {back.max()} points, got {lookback}."
        )
    return inputs[..., lookback - back, :]


class Windows:
    """A split's forecasting windows, normalised by the training split's statistics: random access (for grain),
    each ``{"inputs": [lookback, C], "targets": [horizon, C], "weight": 1}``.

    Args:
      split_values, split_start: the split's series (``values [T, C]`` from its beginning) and its first own step.
      train_values: the training split's series, whose mean and deviation normalise every split.
      lookback, horizon: the window's input and target lengths.
    """

    def __init__(self, split_values, split_start: int, train_values, lookback: int, horizon: int):
        mean, std = normalization(train_values)
        self.values = ((check_series(split_values) - mean) / std).astype(np.float32)
        self.starts = window_starts(len(self.values), lookback, horizon, int(split_start))
        self.lookback, self.horizon = lookback, horizon

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> dict:
        window = self.values[self.starts[index] : self.starts[index] + self.lookback + self.horizon]
        return {"inputs": window[: self.lookback], "targets": window[self.lookback :], "weight": np.float32(1)}
