"""Statistics over seeds against independent references: the standard library, scipy's t-tests and statsmodels'
Holm correction."""

import statistics

import numpy as np
import pytest
from helpers import holm_reference
from scipy import stats

from rfa.configs.tasks import sort
from rfa.experiments.common.report import training_table
from rfa.experiments.common.seeded import train_seeds
from rfa.experiments.common.spread import Spread, compare, holm, over_seeds, verdicts
from rfa.workdir import ConfigError


def test_a_spread_is_the_mean_and_sample_standard_deviation():
    values = [0.91, 0.95, 0.90, 0.97]
    spread = Spread.of(values)
    assert spread.mean == pytest.approx(statistics.mean(values)) and spread.n == 4
    assert spread.std == pytest.approx(statistics.stdev(values))  # n - 1 in the denominator
    assert Spread.of([0.5]) == Spread(0.5, 0.0, 1) and Spread.of([0.5]).cell("{:.2f}") == "0.50"
    with pytest.raises(ValueError, match="non-empty"):
        Spread.of([])


@pytest.mark.parametrize("seed", range(12))
def test_a_comparison_is_scipys_paired_welch_or_one_sample_t_test(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    a, b = rng.normal(0, 1, n), rng.normal(rng.uniform(-2, 2), rng.uniform(0.2, 2), n)
    paired = compare(dict(enumerate(a)), dict(enumerate(b)))
    reference = stats.ttest_rel(a, b)
    interval = reference.confidence_interval(0.95)
    assert paired.test == "paired" and paired.n == n
    assert (paired.difference, paired.p) == (pytest.approx(np.mean(a - b)), pytest.approx(reference.pvalue))
    assert (paired.low, paired.high) == (pytest.approx(interval.low), pytest.approx(interval.high))
    welch = compare(dict(enumerate(a)), {s + 100: v for s, v in enumerate(b[:-1])})  # other seeds: not paired
    reference = stats.ttest_ind(a, b[:-1], equal_var=False)
    assert welch.test == "welch" and welch.p == pytest.approx(reference.pvalue)
    assert (welch.low, welch.high) == pytest.approx(tuple(reference.confidence_interval(0.95)))
    baseline = float(rng.normal(0, 2))
    one = compare(dict(enumerate(a)), baseline)
    reference = stats.ttest_1samp(a, baseline)
    assert one.test == "one-sample" and one.p == pytest.approx(reference.pvalue)
    assert (one.low + baseline, one.high + baseline) == pytest.approx(tuple(reference.confidence_interval(0.95)))


def test_a_reference_with_more_seeds_is_paired_on_the_shared_ones_and_one_seed_is_no_test():
    more = compare({0: 0.9, 1: 0.92, 2: 0.93}, {0: 0.8, 1: 0.83, 2: 0.82, 3: 0.9, 4: 0.1})
    assert more.test == "paired" and more.p == pytest.approx(
        stats.ttest_rel([0.9, 0.92, 0.93], [0.8, 0.83, 0.82]).pvalue
    )
    single = compare({0: 0.9}, {0: 0.5})
    assert single.n == 1 and np.isnan(single.p) and single.cell("{:.3f}") == "+0.400 (1 seed: no interval)"
    flat = compare({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.5})  # every difference the same: no spread to test against
    assert (flat.p, flat.low, flat.high) == (0.0, pytest.approx(0.1), pytest.approx(0.1))
    assert compare({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0}).p == 1.0


@pytest.mark.parametrize("seed", range(8))
def test_holm_rejects_what_statsmodels_rejects(seed):
    p = np.random.default_rng(seed).uniform(0, 0.08, 10) ** np.random.default_rng(seed + 1).uniform(0.5, 2, 10)
    assert holm(list(p)) == holm_reference(p)
    assert holm([0.01, float("nan"), 0.02]) == [True, False, True]  # NaN: no test, not counted


def test_the_words_name_the_side_and_never_call_a_difference_a_tie():
    exact = {0: 0.90, 1: 0.91, 2: 0.92}
    better = compare({0: 0.95, 1: 0.96, 2: 0.971}, exact)
    worse = compare({0: 0.50, 1: 0.52, 2: 0.51}, exact)
    unclear = compare({0: 0.99, 1: 0.80, 2: 0.93}, exact)
    assert verdicts([better, worse, unclear], higher_is_better=True) == ["better", "worse", "not separated (3 seeds)"]
    assert verdicts([better, worse], higher_is_better=False) == ["worse", "better"]
    alone = compare({0: 0.97, 1: 0.971, 2: 0.974}, exact)  # p ~ 0.002 alone; Holm over 30 such tests keeps it
    assert verdicts([alone], higher_is_better=True) == ["better"]
    assert verdicts([alone] + [unclear] * 29, higher_is_better=True)[0] == "not separated (3 seeds)"


def _run(seed, accuracy, **fields):
    common = {
        "task": "sort",
        "attention": "exact",
        "num_features": None,
        "steps": 10,
        "step_memory_bytes": 3 * 2**20,
        "step_time_s": 0.01 + seed / 1000,
        "tokens_per_s": 25_000.0,
    }
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
    assert rows[2] == "| sort | exact | - | 3 | 0.910 ± 0.010 | - | - | 0.455 ± 0.005 | - | 11.0 | 25k | 3.0 |"
    low, high = stats.ttest_rel([0.89, 0.91, 0.93], [0.90, 0.91, 0.92]).confidence_interval(0.95)
    assert rows[3].startswith(
        f"| sort | elu | 64 | 3 | 0.910 ± 0.020 | +0.000 [{low:+.3f}, {high:+.3f}] (exact) | "
        "not separated (3 seeds) | 0.455 ± 0.010 | - |"
    )
    same = "-0.600 (the same on all 3 seeds) (exact)"  # every seed's difference -0.600: no interval of width 0
    assert rows[4].startswith(f"| sort | trig | 64 | 3 | 0.310 ± 0.010 | {same} | worse |")
    assert rows[5].startswith("| digits (swin) | exact | - | 1 | 0.500 | - | - |")


def test_seeds_must_be_distinct_and_at_least_one(tmp_path):
    for seeds in ((), (1, 1)):
        with pytest.raises(ConfigError, match=r"config\.seeds must be distinct seeds"):
            train_seeds(sort.get_config("exact,quick"), str(tmp_path), seeds)
    assert not any(tmp_path.iterdir())  # refused before anything trains
