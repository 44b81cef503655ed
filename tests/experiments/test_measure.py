"""Monte Carlo and closed-form measurements of the MSE runner, checked against rfa.theory."""

import math

import jax
import numpy as np
import pytest

import rfa
from rfa.configs.sweeps import attention_output_error, performer_lemma2
from rfa.experiments.sweep_framework.cells import Cell, cells
from rfa.experiments.sweeps import attention_error, kernel_mse

PAIRS = [(0.5, 30.0), (1.0, 60.0), (1.0, 150.0), (1.25, 180.0)]
MONTE_CARLO_CASES = [("trig", {}), ("positive", {}), ("hyperbolic", {}), ("oprf", {})]


def _pairs(dim=8, pairs=PAIRS):
    cells = [Cell("positive", "iid", 1, (("norm", n), ("angle", a))) for n, a in pairs]
    return kernel_mse.cell_vectors(cells, dim)


def test_pair_vectors_have_the_norms_and_angles():
    x, y = _pairs()
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), [n for n, _ in PAIRS], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), [n for n, _ in PAIRS], rtol=1e-6)
    cosines = (x * y).sum(-1) / np.linalg.norm(x, axis=-1) ** 2
    np.testing.assert_allclose(cosines, [math.cos(math.radians(a)) for _, a in PAIRS], atol=1e-6)


@pytest.mark.parametrize(("estimator", "params"), MONTE_CARLO_CASES)
def test_third_and_fourth_moments_match_monte_carlo(estimator, params):
    x, y = _pairs(pairs=[(0.3, 30.0), (0.5, 150.0), (0.7, 120.0)])  # light tails: 2·10^5 draws suffice
    keys = jax.random.split(jax.random.key(3), 200_000)
    one_vector = jax.jit(
        jax.vmap(
            lambda key: rfa.estimate_softmax_kernel(
                x, y, rfa.sample_projection(key, 1, x.shape[-1], projection_kind="iid"), estimator
            )
        )
    )
    ratio = np.asarray(one_vector(keys), np.float64) / np.asarray(rfa.softmax_kernel(x, y), np.float64)
    expected = np.exp(rfa.estimator(estimator).theory.log_relative_moments(x, y, **params))
    for k in (3, 4):
        np.testing.assert_allclose((ratio**k).mean(0), expected[:, k - 1], rtol=0.15)


def test_predicted_error_is_zero_for_exact_and_infinite_without_a_fourth_moment():
    x, y = _pairs()
    exact = kernel_mse.predicted_relative_error("positive", x[3:], y[3:], 16, 1000)  # x + y = 0
    assert exact[0] == 0.0
    heavy = kernel_mse.predicted_relative_error("gerf", x, y, 16, 1000, A=0.07)  # A >= 1/16
    assert np.all(np.isinf(heavy))


def _tiny_kernel_config(**overrides):
    config = performer_lemma2.get_config("quick")
    config.estimators, config.num_features, config.repetitions = ("positive", "trig"), (8,), 4000
    config.geometry.norms, config.geometry.angles = (0.5, 1.0), (60.0, 150.0)
    config.max_relative_error = 0.0
    for field, value in overrides.items():
        config[field] = value
    return config


def _measure(config, estimator="positive", kind="iid"):
    group = [c for c in cells(config) if c.group == (estimator, kind, config.num_features[0])]
    return {cell.name: record for cell, record in kernel_mse.measure(config, group)}


def test_monte_carlo_matches_theory_with_the_predicted_standard_error():
    records = _measure(_tiny_kernel_config())
    assert any(r["predicted_relative_error"] < 0.1 for r in records.values())
    for record in records.values():
        se = record["mse_theory"] * record["predicted_relative_error"]
        assert abs(record["mse_monte_carlo"] - record["mse_theory"]) < 4 * se, record
        if record["predicted_relative_error"] < 0.1:  # light tails: the sample SE agrees with the prediction
            assert record["standard_error"] == pytest.approx(se, rel=0.3)
        assert record["repetitions"] == 4000 and record["feature_evaluations"] == 4000 * 2 * 8


def test_results_do_not_depend_on_batching_and_follow_the_seed():
    whole = _measure(_tiny_kernel_config())
    batched = _measure(_tiny_kernel_config(batch_elements=16 * 37))  # uneven: a padded last batch
    for name, record in whole.items():
        assert batched[name]["mse_monte_carlo"] == pytest.approx(record["mse_monte_carlo"], rel=1e-5)
    reseeded = _measure(_tiny_kernel_config(seed=1))
    assert all(reseeded[n]["mse_monte_carlo"] != r["mse_monte_carlo"] for n, r in whole.items())


@pytest.mark.slow
def test_orthogonal_cells_get_the_exact_mse_and_theorem_2_bound():
    config = _tiny_kernel_config(projections=("orthogonal",))
    for record in _measure(config, kind="orthogonal").values():
        assert record["mse_theory"] <= record["mse_bound"] * (1 + 1e-5)
    trig = _measure(config, estimator="trig", kind="orthogonal")
    assert all(math.isnan(r["mse_theory"]) and math.isnan(r["mse_bound"]) for r in trig.values())


def test_cells_with_an_unreliable_monte_carlo_are_listed_but_not_run():
    config = _tiny_kernel_config(max_relative_error=0.05, repetitions=1000)
    records = _measure(config)
    skipped = [r for r in records.values() if r["repetitions"] == 0]
    assert skipped and all(r["predicted_relative_error"] > 0.05 and math.isnan(r["mse_monte_carlo"]) for r in skipped)
    assert all(np.isfinite(r["mse_theory"]) for r in records.values())


@pytest.mark.slow
def test_attention_error_falls_with_m_and_shares_inputs_across_estimators():
    config = attention_output_error.get_config("quick")
    config.length, config.num_seeds, config.num_features, config.input_scales = 256, 3, (8, 128), (0.5,)
    config.batch_elements = 256 * 128 * 2 * 2  # two seeds per batch: the last batch is padded
    inputs = attention_error.ScaledInputs(config)
    records = {}
    for estimator in ("positive", "oprf"):
        for m in config.num_features:
            group = [c for c in cells(config) if c.group == (estimator, "orthogonal", m)]
            records[estimator, m] = next(attention_error.measure(config, group, inputs))[1]
    for estimator in ("positive", "oprf"):
        assert records[estimator, 128]["mse"] < records[estimator, 8]["mse"]
        assert records[estimator, 128]["seeds"] == 3
    baselines = {r["mean_of_v_mse"] for r in records.values()}
    assert len(baselines) == 1  # the same inputs for every estimator and m


def test_predicted_error_stays_accurate_for_nearly_exact_estimates():
    # |Δ| ≈ 0.002: the moments of trig features sit within 1e-6 of 1, where raw moments lose every digit.
    x, y = kernel_mse.pair_vectors(0.1, 1.0, 16)
    predicted = kernel_mse.predicted_relative_error("trig", x, y, 64, 10_000)[0]
    assert np.isnan(predicted) or predicted < 0.02  # unknown, or the light tail it is (≈ 0.0148)
    x, y = kernel_mse.pair_vectors(0.1, 30.0, 16)
    kurtosis_free = math.sqrt(2 / 10_000)  # ((κ - 3)/m + 2)/n with κ near 3 for m = 64
    assert kernel_mse.predicted_relative_error("positive", x, y, 64, 10_000)[0] == pytest.approx(
        kurtosis_free, rel=0.05
    )
