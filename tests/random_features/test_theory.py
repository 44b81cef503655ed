"""Every closed form against Monte Carlo of the project's own estimators (fixed seeds, 4 standard errors).

The pairs keep |x + y|² and |x|² + |y|² moderate: the MSE of a squared error is only estimated
reliably when the estimator's fourth moment is (a heavy tail makes Monte Carlo undershoot).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import assert_within, monte_carlo, tiered

import rfa
from rfa.random_features.closed_forms import Theory

D = 8
E0, E1 = np.eye(D, dtype=np.float32)[0], np.eye(D, dtype=np.float32)[1]
PAIRS = {
    "generic": (
        np.array([0.5, 0.2, -0.3, 0.1, 0.0, 0.4, -0.2, 0.1], np.float32),
        np.array([-0.1, 0.3, 0.2, -0.4, 0.2, 0.1, 0.3, 0.0], np.float32),
    ),
    "small_kernel": (E0 + 0.2 * E1, -E0 + 0.1 * E1),  # SM = e^-0.98: where attention mostly lives
    "aligned": (0.4 * E0, 0.5 * E0 + 0.1 * E1),
}
IID_CASES = [
    ("trig", {}),
    ("positive", {}),
    ("hyperbolic", {}),
    ("gerf", {"A": -0.2}),
    ("gerf", {"A": 0.03}),
    ("oprf", {}),
]
NUM_DRAWS = 20000


X = np.stack([x for x, _ in PAIRS.values()])
Y = np.stack([y for _, y in PAIRS.values()])


def assert_matches_monte_carlo(estimator, num_features, kind, params):
    """Unbiasedness and the closed-form MSE at every pair, from one jitted Monte Carlo run over all pairs."""

    def estimate(key):
        W = rfa.sample_projection(key, num_features, D, projection_kind=kind)
        return rfa.estimate_softmax_kernel(X, Y, W, estimator, **params)

    draws = monte_carlo(estimate, NUM_DRAWS, seed=num_features)
    exact = np.asarray(rfa.softmax_kernel(X, Y), np.float64)
    theory = np.asarray(rfa.theory.mse(estimator, X, Y, num_features, projection_kind=kind, **params))
    for i, pair in enumerate(PAIRS):
        assert_within(draws[:, i], exact[i], f"{pair}: mean")
        assert_within((draws[:, i] - exact[i]) ** 2, theory[i], f"{pair}: MSE")
    return theory


@pytest.mark.parametrize(("estimator", "params"), IID_CASES, ids=str)
def test_iid_mse_matches_monte_carlo(estimator, params):
    assert_matches_monte_carlo(estimator, 4, "iid", params)


@pytest.mark.slow
@pytest.mark.parametrize("num_features", [4, 8, 13, 16])
@pytest.mark.parametrize(("estimator", "params"), [("positive", {}), ("gerf", {"A": -0.2}), ("oprf", {})], ids=str)
def test_orthogonal_mse_matches_monte_carlo(num_features, estimator, params):
    theory = assert_matches_monte_carlo(estimator, num_features, "orthogonal", params)
    assert np.all(theory < np.asarray(rfa.theory.mse(estimator, X, Y, num_features, **params)))


@pytest.mark.slow
@pytest.mark.parametrize("num_features", [3, 8, 13])
@pytest.mark.parametrize(("estimator", "params"), [("positive", {}), ("gerf", {"A": -0.2}), ("oprf", {})], ids=str)
def test_simplex_mse_matches_monte_carlo_and_beats_orthogonal(num_features, estimator, params):
    theory = assert_matches_monte_carlo(estimator, num_features, "simplex", params)
    orthogonal = np.asarray(rfa.theory.mse(estimator, X, Y, num_features, projection_kind="orthogonal", **params))
    assert np.all(theory < orthogonal)


def test_simplex_row_pair_expectation_matches_a_simulation_of_its_geometry():
    """E exp((w_i + w_j)ᵀz) for two rows of one simplex block, from the closed form's covariance, against a
    NumPy simulation written from the construction alone (Haar rotation, chi norms, cos = -1/(d-1))."""
    rng = np.random.default_rng(0)
    d, z = 4, np.array([0.6, -0.3, 0.4, 0.2])
    q, r = np.linalg.qr(rng.standard_normal((40000, d, d)))
    directions = (q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]).transpose(0, 2, 1)  # Haar rows
    angle = math.acos(-1 / (d - 1))
    pair = np.stack([directions[:, 0], math.cos(angle) * directions[:, 0] + math.sin(angle) * directions[:, 1]], 1)
    norms = np.sqrt(rng.chisquare(d, (len(pair), 2)))
    sample = np.exp((pair * norms[..., None]).sum(1) @ z)
    # Two simplex rows (m = 2 <= d): MSE = V/2 + (2/4)·Cov, with Cov = Λ²(E - exp(|z|²)) for x = y = z/2.
    x = (z / 2).astype(np.float32)
    log_var = float(rfa.theory.log_mse("positive", x, x, 1))
    mse = float(rfa.theory.mse("positive", x, x, 2, projection_kind="simplex"))
    lam_sq = math.exp(-2 * float(x @ x))
    expected = (mse - math.exp(log_var) / 2) * 2 / lam_sq + math.exp(float(z @ z))
    assert_within(sample, expected, "E exp((w_i + w_j)ᵀz)")


def test_orthogonal_mse_of_k_blocks_is_one_block_over_k():
    x, y = PAIRS["generic"]
    one = float(rfa.theory.mse("positive", x, y, D, orthogonal=True))
    np.testing.assert_allclose(rfa.theory.mse("positive", x, y, 3 * D, orthogonal=True), one / 3, rtol=1e-5)


def test_orthogonal_mse_with_one_vector_is_iid():
    x, y = PAIRS["generic"]
    np.testing.assert_allclose(rfa.theory.mse("oprf", x, y, 1, orthogonal=True), rfa.theory.mse("oprf", x, y, 1))


@pytest.mark.parametrize("num_features", [2, 5, 8])
def test_theorem_2_bound_sits_between_exact_orthogonal_and_iid(num_features):
    x, y = (np.random.default_rng(0).standard_normal((2, 20, D)) * 0.4).astype(np.float32)
    exact = rfa.theory.mse("positive", x, y, num_features, orthogonal=True)
    bound = rfa.theory.orthogonal_mse_bound(x, y, num_features)
    iid = rfa.theory.mse("positive", x, y, num_features)
    assert bool(jnp.all(exact <= bound * (1 + 1e-5))) and bool(jnp.all(bound <= iid))


def test_hyperbolic_is_half_one_minus_exp_times_positive():
    x, y = PAIRS["generic"]
    z_sq = float(np.sum((x + y) ** 2))
    np.testing.assert_allclose(
        rfa.theory.mse("hyperbolic", x, y, 4),
        0.5 * (1 - np.exp(-z_sq)) * rfa.theory.mse("positive", x, y, 4),
        rtol=1e-5,
    )


def test_optimal_parameter_minimizes_the_variance():
    x, y = PAIRS["generic"]
    z_sq = float(np.sum((x + y) ** 2))
    a_star = float(rfa.optimal_gerf_parameter(z_sq, D))
    grid = np.linspace(-0.5, 0.06, 113)
    variances = [float(rfa.theory.log_mse("gerf", x, y, 1, A=a)) for a in grid]
    assert a_star <= 0.0
    assert abs(grid[int(np.argmin(variances))] - a_star) <= grid[1] - grid[0]
    np.testing.assert_allclose(rfa.theory.log_mse("oprf", x, y, 1), min(variances), atol=1e-4)
    assert float(rfa.optimal_gerf_parameter(0.0, D)) == 0.0


def _pair_at(length, degrees, dim):
    angle = math.radians(degrees)
    x = np.zeros(dim, np.float32)
    y = np.zeros(dim, np.float32)
    x[0] = length
    y[0], y[1] = length * math.cos(angle), length * math.sin(angle)
    return x, y


@pytest.mark.parametrize(
    ("length", "degrees", "published"), [(1, 90, 0.43), (1, 120, 5.3), (1, 150, 65), (1, 170, 826), (2, 150, 7.9e5)]
)
def test_performer_fig2_ratio_trig_over_positive(length, degrees, published):
    x, y = _pair_at(length, degrees, 16)
    ratio = float(rfa.theory.mse("trig", x, y, 64) / rfa.theory.mse("positive", x, y, 64))
    np.testing.assert_allclose(ratio, published, rtol=0.05)


@pytest.mark.parametrize(("estimator", "float64"), [("trig", 15.3062), ("positive", 32.0), ("oprf", 23.7348)])
def test_chefs_random_tables_log_variance(estimator, float64):
    """docs/references.md, "oprf_variance": the closed forms in float64 at 2√2, 60°, d = 64 (OPRF 23.735, not 23.8)."""
    x, y = _pair_at(2 * math.sqrt(2), 60, 64)
    np.testing.assert_allclose(float(rfa.theory.log_mse(estimator, x, y, 1)), float64, atol=5e-3)


def test_log_mse_is_right_where_mse_overflows():
    """|x| = |y| = 8 at 30°: positive's MSE e^{|z|²} SM² overflows; its log is 2xᵀy + log(e^{|z|²} - 1)."""
    x, y = _pair_at(8.0, 30, 16)
    assert np.isinf(float(rfa.theory.mse("positive", x, y, 1)))
    xy, z_sq = float(np.dot(x, y)), float(np.sum((np.float64(x) + y) ** 2))
    np.testing.assert_allclose(float(rfa.theory.log_mse("positive", x, y, 1)), 2 * xy + z_sq, rtol=1e-5)
    iid, orthogonal = (float(rfa.theory.log_mse("oprf", x, y, 16, orthogonal=o)) for o in (False, True))
    d = 16
    rho = z_sq / d
    A = (1 - 2 * rho - np.sqrt((2 * rho + 1) ** 2 + 8 * rho)) / 16
    log_second_moment = d / 2 * np.log((1 - 4 * A) ** 2 / (1 - 8 * A)) + z_sq / (1 - 8 * A)  # ≫ 0: the -1 is negligible
    np.testing.assert_allclose(iid, 2 * xy + log_second_moment - np.log(16), rtol=1e-5)
    assert iid - 1.0 < orthogonal <= iid  # the orthogonal correction is negligible at this |z|


@pytest.mark.parametrize("estimator", ["gaussian_trig", "gaussian_cosine"])
def test_gaussian_mse_formulas(estimator):
    x, y = PAIRS["generic"]
    delta_sq = float(np.sum((x - y) ** 2))
    per_vector = {
        "gaussian_trig": (1 - np.exp(-delta_sq)) ** 2 / 2,
        "gaussian_cosine": 1 + np.exp(-2 * delta_sq) / 2 - np.exp(-delta_sq),
    }[estimator]
    np.testing.assert_allclose(rfa.theory.mse(estimator, x, y, 8), per_vector / 8, rtol=1e-5)


@pytest.mark.parametrize("orthogonal", [False, True])
def test_theory_under_jit_vmap_grad(orthogonal):
    x, y = (np.random.default_rng(1).standard_normal((2, 6, D)) * 0.4).astype(np.float32)
    fn = jax.jit(lambda x, y: rfa.theory.log_mse("oprf", x, y, 12, orthogonal=orthogonal))
    np.testing.assert_allclose(jax.vmap(fn)(x, y), fn(x, y), rtol=1e-5)
    grad = np.asarray(jax.grad(lambda x: jnp.sum(fn(x, y)))(x), np.float64)
    direction = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    eps = 1e-2  # central differences of the (Monte-Carlo-checked) function itself, in float32
    expected = (float(jnp.sum(fn(x + eps * direction, y))) - float(jnp.sum(fn(x - eps * direction, y)))) / (2 * eps)
    assert abs(float(np.sum(grad * direction)) - expected) <= 1e-2 * abs(expected) + 1e-3


def test_orthogonal_mse_is_zero_where_the_estimator_is_exact():
    """y = -x: z = 0 makes every positive feature constant; the log-MSE is -inf, not NaN."""
    x = PAIRS["generic"][0]
    assert np.isneginf(float(rfa.theory.log_mse("positive", x, -x, 4, orthogonal=True)))


def test_oprf_theory_accepts_the_attention_statistic():
    x, y = PAIRS["generic"]
    A = rfa.optimal_gerf_parameter(2.5, D)
    np.testing.assert_allclose(
        rfa.theory.log_mse("oprf", x, y, 8, phi_sq=2.5), rfa.theory.log_mse("gerf", x, y, 8, A=A), rtol=1e-6
    )


@pytest.mark.parametrize("dim", tiered([2, 16], {16}))
def test_closed_forms_are_never_nan_from_tiny_to_huge_pairs(dim):
    """Every closed form, every projection it covers: finite or +inf (overflow), never NaN."""
    norms, angles = np.array([1e-3, 0.1, 1.0, 3.0, 10.0, 30.0]), np.array([0.0, 1.0, 60.0, 120.0, 179.0, 180.0])
    radians = np.radians(angles)[None, :] + 0 * norms[:, None]
    x = np.zeros((norms.size * angles.size, dim), np.float32)
    y = np.zeros_like(x)
    x[:, 0] = np.repeat(norms, angles.size)
    y[:, 0], y[:, 1] = x[:, 0] * np.cos(radians).ravel(), x[:, 0] * np.sin(radians).ravel()
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4 * dim, dim)) * np.linspace(0.3, 1.5, dim), rng.standard_normal((4 * dim, dim))
    for estimator in rfa.theory.estimators_with_theory():
        fm = rfa.estimator(estimator)
        params = {}
        if estimator == "gerf":
            params = {"A": -0.3}
        elif fm.fit is not None:  # oprf and the DERFs: fitted to anisotropic queries and keys
            params = {name: np.asarray(value)[0] for name, value in fm.fit(q, k).items()}
        for projection in fm.theory.projection_kinds:
            for m in (2, 3 * dim + 1):
                mse = np.asarray(rfa.theory.mse(estimator, x, y, m, projection_kind=projection, **params))
                assert not np.isnan(mse).any() and (mse >= 0).all(), (estimator, projection, m)


def test_the_estimators_with_a_closed_form_default_to_iid_projections():
    names = rfa.theory.estimators_with_theory()
    assert names == rfa.theory.estimators_with_theory("iid")
    assert {"trig", "positive", "hyperbolic", "gerf", "oprf", "gaussian_trig", "gaussian_cosine"} <= set(names)


def test_oprf_relative_moments_without_phi_sq_use_the_optimal_parameter_of_the_pair():
    """``log E[(Y/K)^k]`` of one vector w ~ N(0, I): ``Y = (1-4A)^{d/2} exp(2A|w|² + √(1-4A) wᵀ(x+y) - (|x|²+|y|²)/2)``
    factorizes over the coordinates of w, so each moment is a product of 1-D integrals (here by quadrature)."""
    x, y = (v.astype(np.float64) for v in PAIRS["generic"])
    z = x + y
    A = float(references.optimal_gerf_parameter(z @ z, D))
    log_moments = rfa.estimator("oprf").theory.log_relative_moments(x, y)
    for k in range(1, 5):
        expected = k * D / 2 * math.log(1 - 4 * A) - k * (x @ x + y @ y) / 2 - k * (x @ y)
        expected += sum(references.log_gerf_coordinate_moment(k, A, z_l) for z_l in z)
        np.testing.assert_allclose(log_moments[k - 1], expected, rtol=1e-6, atol=1e-6)


MOMENT_CASES = [("trig", {}), ("positive", {}), ("hyperbolic", {}), ("oprf", {}), ("gerf", {"A": -0.2})]


@pytest.mark.parametrize(("estimator", "params"), [*MOMENT_CASES, ("gaussian_trig", {})], ids=str)
def test_moments_are_unbiased_and_give_the_closed_form_variance(estimator, params):
    log_moments = rfa.estimator(estimator).theory.log_relative_moments(X, Y, **params)
    np.testing.assert_allclose(log_moments[:, 0], 0.0, atol=1e-9)  # E[Y/K] = 1
    kernel = (rfa.gaussian_kernel if estimator.startswith("gaussian") else rfa.softmax_kernel)(X, Y)
    variance = np.expm1(log_moments[:, 1]) * np.asarray(kernel, np.float64) ** 2  # Var Y = K² (E[(Y/K)²] - 1)
    theory = np.asarray(rfa.theory.mse(estimator, X, Y, 1, **params), np.float64)
    np.testing.assert_allclose(variance, theory, rtol=2e-4, atol=1e-9)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_the_fourth_moment_of_a_mean_is_that_of_a_binomial_proportion(p):
    """U = B/p with B ~ Bernoulli(p) has E U = 1 and E U^k = p^(1-k); the mean of m draws is K/(m p) with
    K ~ Binomial(m, p), whose fourth central moment is a sum over K's distribution. ``log_moments`` carries a
    batch of three axes (the central moments sum over the last only)."""
    log_moments = np.broadcast_to((1 - np.arange(1, 5)) * math.log(p), (2, 3, 4))
    mu2, mu4, _ = rfa.theory.central_moments(log_moments)
    np.testing.assert_allclose(mu2, (1 - p) / p, rtol=1e-12)
    np.testing.assert_allclose(mu4, p * (1 / p - 1) ** 4 + (1 - p), rtol=1e-12)  # E (U - 1)^4, two values of U
    for m in (1, 3, 16):
        k = np.arange(m + 1)
        pmf = np.array([math.comb(m, i) * p**i * (1 - p) ** (m - i) for i in k])
        expected = np.sum(pmf * (k / (m * p) - 1) ** 4)
        np.testing.assert_allclose(rfa.theory.mean_fourth_moment(mu2, mu4, m), expected, rtol=1e-10)


@pytest.mark.parametrize(("sign", "base"), [(1.0, "trig"), (-1.0, "positive")])
def test_the_hybrid_fourth_moment_is_its_base_alone_at_angles_0_and_pi(sign, base):
    """At λ = 0 (y along x) HRF is its trig estimator, at λ = 1 (y against x) its positive one, so the bound is
    exact there: the base's ``E e⁴`` of a mean of m terms, from its raw relative moments ρ_k = E U^k. In float64
    these x, y = ±3x give a cosine of ±(1 + 2⁻⁵²), which must not turn λ into NaN."""
    x = np.array([0.06, -0.19, -0.11, -0.33, -0.38, 0.19, 0.17, 0.39])
    y, m = sign * 3 * x, 16
    rho = np.exp(rfa.estimator(base).theory.log_relative_moments(x, y))
    mu2, mu4 = rho[1] - 1, rho[3] - 4 * rho[2] + 6 * rho[1] - 3
    expected = (mu4 + 3 * (m - 1) * mu2**2) / m**3
    fourth = rfa.estimator("hybrid").theory.error_fourth_moment(x, y, m)
    np.testing.assert_allclose(fourth, expected, rtol=1e-6)


def test_the_keyword_of_before_0_3_gives_the_same_closed_form_with_a_warning():
    x, y = PAIRS["generic"]
    with pytest.warns(DeprecationWarning, match=r"log_mse\(projection=...\) is log_mse\(projection_kind=...\)"):
        old = rfa.theory.mse("positive", x, y, 4, projection="orthogonal")
    np.testing.assert_array_equal(old, rfa.theory.mse("positive", x, y, 4, projection_kind="orthogonal"))
    with pytest.warns(DeprecationWarning, match=r"estimators_with_theory\(projection=...\)"):
        assert rfa.theory.estimators_with_theory(projection="simplex") == rfa.theory.estimators_with_theory("simplex")


def test_a_theory_written_for_0_2_still_works_with_a_warning():
    """``Theory(projections=)`` is ``Theory(projection_kinds=)``, and a ``log_mse`` taking ``projection=`` (rfa 0.2's
    protocol) is called with the kind under that name (docs/changelog.md)."""
    seen = []

    def old_log_mse(x, y, num_features, *, projection, num_terms):
        seen.append(projection)
        return jnp.zeros(x.shape[:-1])

    with pytest.warns(DeprecationWarning) as caught:
        theory = Theory(old_log_mse, projections=("iid", "orthogonal"))
    assert theory.projection_kinds == ("iid", "orthogonal")
    messages = " ".join(str(w.message) for w in caught)
    assert "Theory(projection_kinds=...)" in messages and "takes projection_kind= since rfa 0.3" in messages
    x, y = PAIRS["generic"]
    theory.log_mse(x, y, 4, projection_kind="orthogonal", num_terms=8)
    assert seen == ["orthogonal"]
    current = Theory(rfa.estimator("positive").theory.log_mse)  # today's protocol: taken as it is, silently
    assert current.log_mse is rfa.estimator("positive").theory.log_mse
