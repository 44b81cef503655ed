"""Statistics over seeds against independent references: the standard library, and scipy's Welch t statistic."""

import statistics

import numpy as np
import pytest
from scipy import stats

from configs import sort
from experiments.report import training_table
from experiments.spread import Spread, over_seeds, separated, versus
from experiments.studies.seeded import train_seeds
from rfa.workdir import ConfigError


def test_a_spread_is_the_mean_and_sample_standard_deviation():
    values = [0.91, 0.95, 0.90, 0.97]
    spread = Spread.of(values)
    assert spread.mean == pytest.approx(statistics.mean(values)) and spread.n == 4
    assert spread.std == pytest.approx(statistics.stdev(values))  # n - 1 in the denominator
    assert Spread.of([0.5]) == Spread(0.5, 0.0, 1) and Spread.of([0.5]).cell("{:.2f}") == "0.50"
    with pytest.raises(ValueError, match="non-empty"):
        Spread.of([])


@pytest.mark.parametrize("seed", range(20))
def test_separated_means_a_welch_statistic_above_two(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 1, 3), rng.normal(rng.uniform(0, 4), rng.uniform(0.2, 2), 3)
    welch = stats.ttest_ind(a, b, equal_var=False).statistic
    assert separated(Spread.of(a), Spread.of(b)) == (abs(welch) > 2)
    baseline = float(rng.normal(0, 2))  # a constant: the one-sample t statistic
    assert separated(Spread.of(a), baseline) == (abs(stats.ttest_1samp(a, baseline).statistic) > 2)


def test_versus_names_the_better_side_and_ties_within_the_spread():
    high, low = Spread(0.9, 0.01, 3), Spread(0.8, 0.01, 3)
    assert versus(high, low, higher_is_better=True) == "better" and versus(high, low, higher_is_better=False) == "worse"
    assert (
        versus(low, 0.9, higher_is_better=True) == "worse"
        and versus(Spread(0.9, 0.2, 3), low, higher_is_better=True) == "tie"
    )
    assert versus(Spread(0.9, 0.0, 1), low, higher_is_better=True) == "tie"  # one seed: no spread to judge by


def _run(seed, accuracy, **fields):
    common = {"task": "sort", "attention": "exact", "num_features": None, "steps": 10, "step_memory_bytes": 3 * 2**20,
              "step_time_s": 0.01 + seed / 1000, "tokens_per_s": 25_000.0}  # fmt: skip
    metrics = {"step": 10, "accuracy": accuracy, "sequence_accuracy": accuracy / 2}
    return {**common, "seed": seed, "validation": metrics, "test": metrics, **fields}


def test_the_training_table_reports_mean_and_spread_and_compares_with_the_first_kind():
    exact = over_seeds([_run(s, a) for s, a in enumerate((0.90, 0.91, 0.92))])
    close = over_seeds([_run(s, a, attention="elu", num_features=64) for s, a in enumerate((0.89, 0.91, 0.93))])
    far = over_seeds([_run(s, a, attention="trig", num_features=64) for s, a in enumerate((0.30, 0.31, 0.32))])
    digits = over_seeds([_run(0, 0.5, task="digits", architecture="swin")])
    assert exact["seeds"] == [0, 1, 2] and exact["step_time_s"] == pytest.approx(0.011)
    assert exact["test"]["accuracy"] == pytest.approx({"mean": 0.91, "std": 0.01, "n": 3})
    rows = training_table([exact, close, far, digits]).splitlines()
    assert rows[2] == "| sort | exact | - | 3 | 0.910 ± 0.010 | - | 0.455 ± 0.005 | - | 11.0 | 25k | 3.0 |"
    assert rows[3].startswith("| sort | elu | 64 | 3 | 0.910 ± 0.020 | tie (exact) | 0.455 ± 0.010 | - |")
    assert rows[4].startswith("| sort | trig | 64 | 3 | 0.310 ± 0.010 | worse (exact) |")
    assert rows[5].startswith("| digits (swin) | exact | - | 1 | 0.500 | - |")


def test_seeds_must_be_distinct_and_at_least_one(tmp_path):
    for seeds in ((), (1, 1)):
        with pytest.raises(ConfigError, match=r"config\.seeds must be distinct seeds"):
            train_seeds(sort.get_config("exact,quick"), str(tmp_path), seeds)
    assert not any(tmp_path.iterdir())  # refused before anything trains
