"""Bundled time series: chronological splits, gap filling, windows, training-split normalisation, seasonal-naive."""

import numpy as np
import pytest
import statsmodels.api as sm

import rfa.data as data
import rfa.tasks as tasks
from rfa.data.series import check_series, normalization, seasonal_naive, window_starts


def test_window_starts_put_every_target_in_the_split_and_nothing_past_the_end():
    length, lookback, horizon, start = 40, 8, 3, 25
    starts = window_starts(length, lookback, horizon, start)
    targets = [range(s + lookback, s + lookback + horizon) for s in starts]
    assert all(t[0] >= start and t[-1] < length for t in targets)
    assert targets[0][0] == start and targets[-1][-1] == length - 1  # every split point is a first target once
    with pytest.raises(ValueError, match=r"lookback \+ horizon = 38 \+ 3 is longer than the series \(40 points\)"):
        window_starts(length, 38, 3, 0)
    with pytest.raises(ValueError, match="horizon must be an integer >= 1, got 0"):
        window_starts(length, 8, 0, 0)


def test_seasonal_naive_repeats_the_last_season():
    inputs = np.arange(10.0)[None, :, None]  # time steps 0..9
    forecast = seasonal_naive(inputs, horizon=6, season=4)[0, :, 0]
    expected = [t - 4 * int(np.ceil((t - 9) / 4)) for t in range(10, 16)]  # t - k*season, the latest observed
    np.testing.assert_array_equal(forecast, expected)
    with pytest.raises(ValueError, match="needs a lookback of at least 4 points, got 3"):
        seasonal_naive(np.zeros((3, 1)), horizon=5, season=4)


def test_a_series_with_nan_says_where():
    values = np.ones((50, 2))
    values[17, 1] = np.nan
    values[30, 0] = np.nan
    with pytest.raises(ValueError, match=r"has 2 non-finite values, the first at time step 17 \(channel 1\)"):
        check_series(values)
    mean, std = normalization(np.array([[1.0], [3.0]]))
    np.testing.assert_allclose([mean[0], std[0]], [2.0, 1.0])


@pytest.mark.slow
def test_co2_splits_are_chronological_with_the_gaps_filled(data_dir):
    task = tasks.get_task("co2")
    raw = sm.datasets.co2.load_pandas().data["co2"].to_numpy()
    splits = {name: data.load_source(task, name, data_dir)[0] for name in ("train", "validation", "test")}
    test = splits["test"]["values"][:, 0]
    assert len(test) == 2284 and int(splits["validation"]["start"]) == len(splits["train"]["values"]) == 1599
    for name in ("train", "validation"):  # every split is a prefix of the whole series: the past only
        np.testing.assert_array_equal(splits[name]["values"][:, 0], test[: len(splits[name]["values"])])
    observed = ~np.isnan(raw)
    np.testing.assert_allclose(test[observed], raw[observed], rtol=1e-6)
    assert splits["test"]["filled"].sum() == 59 and np.all(splits["test"]["filled"] == ~observed)
    gap = np.flatnonzero(~observed)[0]  # a filled week lies between its observed neighbours
    assert min(test[gap - 1], test[gap + 1]) <= test[gap] <= max(test[gap - 1], test[gap + 1])


@pytest.mark.slow
def test_forecasting_windows_are_normalised_by_the_training_years(data_dir):
    task = tasks.get_task("co2")
    whole = data.load_source(task, "test", data_dir)[0]
    train = data.load_source(task, "train", data_dir)[0]["values"]
    mean, std = train.mean(), train.std()
    batch = next(
        iter(tasks.eval_batches(task, data_dir=data_dir, batch_size=4, max_length=100, split="test", horizon=10))
    )
    first = int(whole["start"])  # the test split's first point is the first window's first target
    values = whole["values"][:, 0]
    np.testing.assert_allclose(batch["targets"][0, :, 0] * std + mean, values[first : first + 10], rtol=1e-5)
    np.testing.assert_allclose(batch["inputs"][0, :, 0] * std + mean, values[first - 100 : first], rtol=1e-5)
    assert batch["inputs"].shape == (4, 100, 1) and batch["targets"].shape == (4, 10, 1)
    with pytest.raises(ValueError, match="a forecasting task needs the horizon"):
        tasks.eval_batches(task, data_dir=data_dir, batch_size=4, max_length=100)
