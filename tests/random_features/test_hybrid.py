"""Hybrid random features (HRF): its features against the estimate's definition, its closed form against
Monte Carlo (fixed seeds), and the worst-case gains of docs/references.md."""

import math

import jax
import numpy as np
import pytest
import references
from helpers import assert_within, monte_carlo

import rfa
from rfa.random_features.estimators.hybrid import hybrid

D, M = 6, 8
HYBRID_3 = rfa.register_estimator(hybrid(3))  # n = 3 angular features: the covariance term counts
PAIRS = (  # |x| != |y| makes the covariance of the two bases nonzero
    (np.array([0.6, 0.1, -0.2, 0.0, 0.3, 0.1]), np.array([0.2, -0.5, 0.1, 0.4, 0.0, -0.2])),
    (np.array([0.9, 0.0, 0.0, 0.2, 0.0, 0.0]), np.array([-0.5, 0.3, 0.0, 0.0, 0.1, 0.0])),  # a small kernel
    (np.array([0.3, 0.3, 0.0, 0.0, 0.0, 0.0]), np.array([0.2, 0.4, 0.1, 0.0, 0.0, 0.0])),  # a small angle
)
X = np.stack([x for x, _ in PAIRS]).astype(np.float32)
Y = np.stack([y for _, y in PAIRS]).astype(np.float32)


@pytest.mark.parametrize("name", ["hybrid", "hybrid_n3"])
def test_query_and_key_features_give_the_hybrid_estimate(name):
    fm = rfa.estimator(name)
    W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D, projection_kind="iid"))
    R = np.asarray(fm.sample_params(jax.random.key(1), M, D)["angular"])
    phi_x = np.asarray(fm(X, W, angular=R), np.float64)
    psi_y = np.asarray(fm(Y, W, side="key", angular=R), np.float64)
    assert phi_x.shape == (len(X), 6 * R.shape[0] * M)
    expected = references.hybrid_estimate(X.astype(np.float64), Y.astype(np.float64), W, R)
    np.testing.assert_allclose(phi_x @ psi_y.T, expected, rtol=1e-5)
    np.testing.assert_allclose(rfa.estimate_softmax_kernel(X, Y, W, name, angular=R), np.diag(expected), rtol=1e-5)
    assert (phi_x < 0).any()  # not positive features: the normalizer of attention may fail (module docstring)


@pytest.mark.parametrize("name", ["hybrid", "hybrid_n3"])
def test_a_base_with_zero_weight_adds_no_rounding_error(name):
    """At 180° every row of R separates x and y (λ̂ = 1) and positive features are exact (x + y = 0): the
    float32 estimate is exp(xᵀy) = e⁻⁹ to rounding, although the unused trig features are of size e⁹."""
    fm = rfa.estimator(name)
    x = np.zeros(D, np.float32)
    x[0] = 3.0
    W = rfa.sample_projection(jax.random.key(0), M, D, projection_kind="iid")
    R = fm.sample_params(jax.random.key(1), M, D)["angular"]
    estimate = float(rfa.estimate_softmax_kernel(x, -x, W, name, angular=R))
    assert estimate == pytest.approx(math.exp(-9.0), rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hybrid", "hybrid_n3"])
def test_unbiased_and_the_closed_form_mse_matches_monte_carlo(name):
    fm = rfa.estimator(name)

    def estimate(key):
        W = rfa.sample_projection(key, M, D, projection_kind="iid")
        return rfa.estimate_softmax_kernel(X, Y, W, name, **fm.sample_params(jax.random.fold_in(key, 1), M, D))

    draws = monte_carlo(estimate, 40000, seed=11)
    exact = np.asarray(rfa.softmax_kernel(X, Y), np.float64)
    theory = np.asarray(rfa.theory.mse(name, X, Y, M), np.float64)
    fourth = fm.theory.error_fourth_moment(X, Y, M) * exact**4  # exact for n = 1, an upper bound for n > 1
    for i in range(len(X)):
        assert_within(draws[:, i], exact[i], f"pair {i}: mean")
        assert_within((draws[:, i] - exact[i]) ** 2, theory[i], f"pair {i}: MSE")
        if i == 0:  # its fourth moment's Monte Carlo needs ~10x more draws (heavy tails: a large 8th moment)
            continue
        errors_4 = (draws[:, i] - exact[i]) ** 4
        if name == "hybrid":
            assert_within(errors_4, fourth[i], f"pair {i}: fourth moment")
        else:
            assert errors_4.mean() < fourth[i] + 4 * errors_4.std() / np.sqrt(len(errors_4)), f"pair {i}: bound"


def test_covariance_of_the_two_bases_sharing_w_matches_monte_carlo():
    """The term HRF's MSE adds for n > 1: Cov(SM̂_trig, SM̂₊₊) = SM² (cos(|x|² - |y|²) - 1)/m."""
    x, y = PAIRS[0]
    W = np.random.default_rng(0).standard_normal((200000, 1, D))
    pos = np.exp(W @ (x + y) - (x @ x + y @ y) / 2)[:, 0]
    trig = np.exp((x @ x + y @ y) / 2) * np.cos(W @ (x - y))[:, 0]
    sm = math.exp(x @ y)
    assert_within((pos - sm) * (trig - sm), sm**2 * (math.cos(x @ x - y @ y) - 1), "Cov")
    # and the closed form uses it: n = 3 differs from n = 1 by the covariance and the variance of λ̂
    lam = math.acos(x @ y / math.sqrt((x @ x) * (y @ y))) / math.pi
    mse = {n: float(rfa.theory.mse(f, x, y, M)) for n, f in ((1, "hybrid"), (3, "hybrid_n3"))}
    base = {e: float(rfa.theory.mse(e, x, y, M)) for e in ("positive", "trig")}
    cov = sm**2 * (math.cos(x @ x - y @ y) - 1) / M
    for n in (1, 3):
        v = lam * (1 - lam) / n
        expected = (
            (lam**2 + v) * base["positive"] + ((1 - lam) ** 2 + v) * base["trig"] + 2 * (lam * (1 - lam) - v) * cov
        )
        np.testing.assert_allclose(mse[n], expected, rtol=1e-4)


@pytest.mark.parametrize(("radius", "published"), [(1.0, 0.29), (2.0, 0.14), (5.0, 0.05)])
def test_worst_case_over_angles_beats_both_bases(radius, published):
    """max over θ of MSE/SM² at |x| = |y| = r, m = 10, n = 1: hybrid vs the better of trig and positive."""
    angles = np.radians(np.linspace(0.0, 180.0, 721))
    x = np.zeros((angles.size, 16), np.float32)
    y = np.zeros_like(x)
    x[:, 0], y[:, 0], y[:, 1] = radius, radius * np.cos(angles), radius * np.sin(angles)
    log_sm_sq = 2 * np.sum(x.astype(np.float64) * y, -1)
    worst = {
        e: np.max(np.asarray(rfa.theory.log_mse(e, x, y, 10), np.float64) - log_sm_sq)
        for e in ("hybrid", "trig", "positive")
    }
    ratio = math.exp(worst["hybrid"] - min(worst["trig"], worst["positive"]))
    assert abs(ratio - published) < 0.01, ratio


def test_bad_input_names_the_argument():
    W = rfa.sample_projection(jax.random.key(0), M, D)
    with pytest.raises(ValueError, match=r"angular must have shape \[n, d\] = \(1, 6\).*got \(2, 6\)"):
        rfa.estimator("hybrid")(X, W, angular=np.ones((2, D)))
    with pytest.raises(ValueError, match="num_angular must be an integer >= 1, got 0"):
        hybrid(0)
    with pytest.raises(TypeError, match=r"'hybrid' needs the parameter\(s\) \['angular'\]"):
        rfa.estimator("hybrid")(X, W)
