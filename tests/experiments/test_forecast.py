"""The forecasting comparison end to end (quick): kinds against seasonal-naive, and step time against lookback."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rfa.configs.studies import forecasting as forecast
from rfa.configs.tasks import co2
from rfa.data.series import seasonal_naive
from rfa.experiments.studies.forecasting import measure as forecasting
from rfa.experiments.studies.forecasting.measure import seasonal_naive_scores
from rfa.tasks import eval_batches, get_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_quick_forecasting_comparison_writes_its_table_and_figure(data_dir, tmp_path):
    output = tmp_path / "forecast.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rfa.experiments.studies.forecasting",
            "--config",
            "forecasting:quick",
            "--workdir",
            str(tmp_path),
            f"--config.data_dir={data_dir}",
            f"--output={output}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(output.read_text())
    assert [(r["attention"], r["seeds"]) for r in results["runs"]] == [("exact", [0]), ("positive", [0])]
    assert set(results["timing"]) == {"exact", "positive"} and all(len(v) == 2 for v in results["timing"].values())
    rows = (tmp_path / "forecast.md").read_text().splitlines()
    assert rows[-1].startswith("| seasonal naive | - | ") and len(rows) == 5
    assert (tmp_path / "forecast.png").stat().st_size > 10_000
    runs = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("**/results.json"))]
    assert len(runs) == 2  # each kind's run trained a forecaster: mean squared and absolute errors of the series
    assert all(r["kind"] == "forecast" and 0 < r["test"]["mae"] ** 2 <= r["test"]["mse"] for r in runs)


@pytest.mark.slow
def test_seasonal_naive_scores_average_over_every_evaluation_window(data_dir):
    config = co2.get_config("exact,quick")
    config.data_dir = data_dir
    scores = seasonal_naive_scores(config)
    task = get_task("co2")
    errors = []  # the same windows, one by one, without the padding rows
    for batch in eval_batches(
        task, data_dir=data_dir, batch_size=5, max_length=config.max_length, split="test", horizon=config.model.horizon
    ):
        kept = batch["weight"] > 0
        errors.append((seasonal_naive(batch["inputs"], config.model.horizon, 52) - batch["targets"])[kept])
    errors = np.concatenate(errors)
    np.testing.assert_allclose([scores["mse"], scores["mae"]], [np.mean(errors**2), np.mean(np.abs(errors))], rtol=1e-5)


def test_a_configuration_is_selected_on_validation_and_only_its_runs_are_reported(tmp_path, monkeypatch):
    trained = []

    def fake_train_seeds(config, workdir, seeds):  # validation MSE by scale, test MSE that would pick otherwise
        trained.append((config.max_length, os.path.relpath(workdir, tmp_path)))
        validation, test = (0.9, 0.1) if config.max_length == 64 else (0.5, 0.7)
        return {
            "validation": {"mse": {"mean": validation}},
            "test": {"mse": {"mean": test}},
            "lookback": config.max_length,
        }

    monkeypatch.setattr(forecasting, "train_seeds", fake_train_seeds)
    comparison = forecast.get_config("sunspots")
    comparison.attention = ("exact", "positive")
    chosen, rows, selection = forecasting.select(comparison, str(tmp_path))
    assert trained == [(32, "default/exact"), (32, "default/positive"), (64, "earlier/exact"), (64, "earlier/positive")]
    assert chosen == "" and [r["lookback"] for r in rows] == [32, 32]  # the lower validation MSE, not test
    assert selection == {"metric": "validation mse", "candidates": {"": 0.5, "earlier": 0.9}, "chosen": ""}
    comparison.candidates = ()
    assert forecasting.select(comparison, str(tmp_path))[2] == {}
