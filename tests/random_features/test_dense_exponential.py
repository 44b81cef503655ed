"""Dense-exponential random features (aderf, saderf, sderf): fits against NumPy/SciPy references, the
optimality and nesting the paper proves, unbiasedness and the closed-form variance against Monte
Carlo (fixed seeds), and attention with parameters fitted inside it or on calibration data."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from flax import nnx
from helpers import assert_within, monte_carlo, normal

import rfa

DERFS = ("aderf", "saderf", "sderf")
D, N = 6, 48
SCALES_Q = np.array([1.2, 0.9, 0.6, 0.4, 0.3, 0.2])  # queries and keys of different covariances
SCALES_K = np.array([0.2, 0.3, 0.5, 0.6, 0.8, 1.0])


def anisotropic(seed, n=N, scales=SCALES_Q, mean=0.0):
    """``n`` vectors with correlated coordinates of the given scales (float32)."""
    mix = np.linalg.qr(np.random.default_rng(100).standard_normal((D, D)))[0]
    return ((normal(seed, (n, D)) * scales) @ mix.T * 0.6 + mean).astype(np.float32)


Q, K = anisotropic(1), anisotropic(2, scales=SCALES_K, mean=0.1)


def fitted(name, q=Q, k=K):
    """rfa's fit of one set, without the length axis: ``A [1 or d]``, transforms ``[d, d]``."""
    return {n: np.asarray(v)[0] for n, v in rfa.estimator(name).fit(jnp.asarray(q), jnp.asarray(k)).items()}


def objective(name, params=None, q=Q, k=K):
    """Mean over all query-key pairs of ``log(MSE + SM²) - log SM²`` with one random vector (iid)."""
    x, y = q[:, None].astype(np.float32), k[None].astype(np.float32)
    log_mse = np.asarray(rfa.theory.log_mse(name, x, y, 1, **(params or {})), np.float64)
    log_sm_sq = 2 * np.sum(x.astype(np.float64) * y, -1)
    return float(np.mean(np.logaddexp(log_mse, log_sm_sq) - log_sm_sq))


@pytest.mark.parametrize("name", DERFS)
def test_fit_equals_the_reference(name):
    params = fitted(name)
    expected = references.DERF_FITS[name](Q, K)
    for n in ("A", "query_transform", "key_transform"):
        np.testing.assert_allclose(params[n], np.broadcast_to(expected[n], params[n].shape), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("name", DERFS)
def test_masked_fit_equals_the_fit_of_the_kept_vectors_under_jit(name):
    keep_q = np.ones((N, 1), bool)
    keep_q[5:20] = False
    keep_k = np.ones((N, 1), bool)
    keep_k[::3] = False
    fm = rfa.estimator(name)
    masked = jax.jit(fm.fit)(Q, K, keep_q, keep_k)
    subset = fm.fit(Q[keep_q[:, 0]], K[keep_k[:, 0]])
    for n in masked:
        np.testing.assert_allclose(masked[n], subset[n], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["aderf", "sderf"])
def test_long_sequences_take_their_second_moments_from_strided_tokens(name):
    """Beyond 1024 tokens the d × d moments come from 1024 evenly strided ones (the means from all): the fit
    equals the one of those tokens' moments, and stays close to the fit of every token."""
    n = 4096
    q, k = anisotropic(30, n), anisotropic(31, n, SCALES_K, 0.1)
    fm = rfa.estimator(name)
    long_fit = {n_: np.asarray(v)[0] for n_, v in fm.fit(jnp.asarray(q), jnp.asarray(k)).items()}
    M1, M2 = (x[::4].T.astype(np.float64) @ x[::4] / (n // 4) for x in (q, k))
    if name == "sderf":
        cross = np.outer(q.mean(0), k.mean(0))
        values = np.linalg.eigvalsh(M1 + M2 + cross + cross.T)
        np.testing.assert_allclose(
            np.sort(long_fit["A"]), np.sort(references.optimal_gerf_parameter(values, 1)), rtol=1e-3
        )
    else:
        K_ = long_fit["query_transform"].T.astype(np.float64) @ long_fit["query_transform"]
        np.testing.assert_allclose(K_ @ M1 @ K_, M2, rtol=2e-3, atol=2e-5)  # stationarity on the strided moments
    every_token = references.DERF_FITS[name](q, k)
    np.testing.assert_allclose(long_fit["A"], np.broadcast_to(every_token["A"], long_fit["A"].shape), rtol=0.1)


def test_aderf_minimises_its_objective_over_positive_definite_k():
    """``tr(K M₁) + tr(K⁻¹ M₂)`` at the fitted K is below its value at random nearby SPD matrices."""
    M1, M2 = Q.T.astype(np.float64) @ Q / N, K.T.astype(np.float64) @ K / N
    params = fitted("aderf")
    M = params["query_transform"].astype(np.float64)  # MᵀM = K
    np.testing.assert_allclose(params["key_transform"], np.linalg.inv(M).T, rtol=1e-3, atol=1e-4)

    def f(K_):
        return np.trace(K_ @ M1) + np.trace(np.linalg.inv(K_) @ M2)

    best = f(M.T @ M)
    rng = np.random.default_rng(0)
    for _ in range(50):
        E = rng.standard_normal((D, D)) * 0.05
        assert f((M + E).T @ (M + E)) > best - 1e-6 * abs(best)


def test_nesting_orders_the_objective_on_anisotropic_data():
    """positive >= oprf >= saderf >= aderf and oprf >= sderf (Likhosherstov et al., 2023): each family
    contains the one before, and every fit is that family's optimum."""
    phi_sq = float(rfa.estimator("oprf").fit(jnp.asarray(Q), jnp.asarray(K))["phi_sq"][0])
    values = {name: objective(name, fitted(name)) for name in DERFS}
    values["positive"] = objective("positive")
    values["oprf"] = objective("oprf", {"phi_sq": phi_sq})
    assert values["positive"] > values["oprf"] > values["saderf"] > values["aderf"], values
    assert values["oprf"] > values["sderf"], values
    assert values["positive"] - values["aderf"] > 0.3, values  # a gain of e^0.3 in the mean second moment


def test_with_one_distribution_aderf_and_saderf_fall_back_to_oprf():
    q = anisotropic(3, n=4000, scales=np.ones(D))
    k = anisotropic(4, n=4000, scales=np.ones(D))
    phi_sq = rfa.estimator("oprf").fit(jnp.asarray(q), jnp.asarray(k))["phi_sq"][0]
    for name in ("aderf", "saderf"):
        params = fitted(name, q, k)
        np.testing.assert_allclose(params["query_transform"], np.eye(D), atol=0.06)
        np.testing.assert_allclose(params["A"], rfa.optimal_gerf_parameter(phi_sq, D), rtol=0.02)


PAIRS = ((0, 1), (7, 3), (20, 40))  # (query, key) indices of the fitted sets


@pytest.mark.parametrize("name", DERFS)
def test_unbiased_and_the_closed_form_variance_matches_monte_carlo(name):
    params = fitted(name)
    x = np.stack([Q[i] for i, _ in PAIRS])
    y = np.stack([K[j] for _, j in PAIRS])
    num_features = 4

    def estimate(key):
        W = rfa.sample_projection(key, num_features, D, projection_kind="iid")
        return rfa.estimate_softmax_kernel(x, y, W, name, **params)

    draws = monte_carlo(estimate, 40000, seed=21)
    exact = np.exp(np.sum(x.astype(np.float64) * y, -1))
    theory = np.asarray(rfa.theory.mse(name, x, y, num_features, **params), np.float64)
    for i in range(len(PAIRS)):
        assert_within(draws[:, i], exact[i], f"{name} pair {i}: mean")
        assert_within((draws[:, i] - exact[i]) ** 2, theory[i], f"{name} pair {i}: MSE")


@pytest.mark.parametrize("projection", ["orthogonal", "simplex"])
def test_aderf_closed_form_with_coupled_rows_matches_monte_carlo(projection):
    params = fitted("aderf")
    x, y = Q[:3], K[3:6]
    num_features = 2 * D + 2  # two blocks and a partial one

    def estimate(key):
        W = rfa.sample_projection(key, num_features, D, projection_kind=projection)
        return rfa.estimate_softmax_kernel(x, y, W, "aderf", **params)

    draws = monte_carlo(estimate, 30000, seed=22)
    exact = np.exp(np.sum(x.astype(np.float64) * y, -1))
    theory = np.asarray(rfa.theory.mse("aderf", x, y, num_features, projection_kind=projection, **params))
    iid = np.asarray(rfa.theory.mse("aderf", x, y, num_features, **params))
    assert np.all(theory < iid)
    for i in range(len(x)):
        assert_within((draws[:, i] - exact[i]) ** 2, theory[i], f"{projection} pair {i}: MSE")


@pytest.mark.parametrize("name", ["aderf", "sderf"])
def test_relative_moments_match_monte_carlo(name):
    """``log E U^k`` (k = 1..4, U = Y/K of one vector) predicts the runner's Monte Carlo error: k = 1 is 0
    (unbiased), k = 2, 3 against Monte Carlo of one-vector estimates."""
    params = fitted(name)
    x, y = Q[20:22], K[40:42]
    log_moments = rfa.estimator(name).theory.log_relative_moments(x, y, **params)
    np.testing.assert_allclose(log_moments[:, 0], 0.0, atol=1e-9)

    def estimate(key):
        return rfa.estimate_softmax_kernel(
            x, y, rfa.sample_projection(key, 1, D, projection_kind="iid"), name, **params
        )

    u = monte_carlo(estimate, 200000, seed=23) / np.exp(np.sum(x.astype(np.float64) * y, -1))
    for i in range(len(x)):
        for k in (2, 3):
            assert_within(u[:, i] ** k, np.exp(log_moments[i, k - 1]), f"pair {i}: E U^{k}")


def test_relative_moments_equal_the_integrals_over_one_gaussian_vector():
    """``log E[(Y/K)^k]``, k = 1..4, exactly: with one vector w ~ N(0, I), ``Y = φ_q(x)ᵀφ_k(y)`` is a product of
    one factor per coordinate of w, so each moment is a product of 1-D integrals (here by quadrature)."""
    params = fitted("aderf")
    x, y = Q[20].astype(np.float64), K[40].astype(np.float64)
    log_moments = rfa.estimator("aderf").theory.log_relative_moments(x, y, **params)
    xt, yt = params["query_transform"] @ x, params["key_transform"] @ y
    a, z = np.broadcast_to(np.asarray(params["A"], np.float64), (D,)), xt + yt
    # Y = Π_l (1-4a_l)^½ exp(2a_l w_l² + √(1-4a_l) z̃_l w_l) · exp(-(|x̃|² + |ỹ|²)/2)  (references.derf, m = 1)
    for k in range(1, 5):
        expected = -k * (xt @ xt + yt @ yt) / 2 - k * (x @ y)
        for a_l, z_l in zip(a, z, strict=True):
            expected += k / 2 * np.log(1 - 4 * a_l) + references.log_gerf_coordinate_moment(k, a_l, z_l)
        np.testing.assert_allclose(log_moments[k - 1], expected, rtol=1e-6, atol=1e-6)  # T_qᵀT_k = I in float32


def test_relative_moments_are_inf_without_a_warning_where_they_diverge():
    # a = 1/8: 1 - 4ka is 0 for k = 2 and negative beyond, where E[(Y/K)^k] is infinite
    x, y = Q[20], K[40]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_moments = rfa.estimator("aderf").theory.log_relative_moments(x, y, A=np.full(D, 0.125))
    assert np.isfinite(log_moments[0]) and np.all(log_moments[1:] == np.inf)


def test_relative_moments_broadcast_the_parameters_against_the_pair():
    moments = rfa.estimator("aderf").theory.log_relative_moments
    x, y, A = Q[20], K[40], np.stack([np.full(D, -0.1), np.full(D, 0.05)])  # two parameters, one pair
    np.testing.assert_allclose(moments(x, y, A=A), [moments(x, y, A=a) for a in A], rtol=1e-12)


def test_features_equal_the_reference_map():
    W = np.asarray(rfa.sample_projection(jax.random.key(0), 10, D))
    for name in DERFS:
        params = fitted(name)
        for side in ("query", "key"):
            x = Q[:4] if side == "query" else K[:4]
            phi = rfa.estimator(name)(x, W, side=side, **params)
            expected = references.derf(x.astype(np.float64), W.astype(np.float64), **params, side=side)
            np.testing.assert_allclose(phi, expected, rtol=2e-5)


def test_standard_params_are_oprf_for_unit_variance_inputs():
    fm = rfa.estimator("aderf")
    params = fm.standard_params(D)
    assert set(params) == {"A"} and isinstance(params["A"], float)
    W = np.asarray(rfa.sample_projection(jax.random.key(1), 12, D))
    oprf = rfa.estimator("oprf")(Q, W, phi_sq=2.0 * D**0.5)
    np.testing.assert_allclose(fm(Q, W, **params), oprf, rtol=1e-5)


@pytest.mark.parametrize("name", ["aderf", "saderf"])
def test_bidirectional_attention_fits_each_row_and_head_and_leaves_padding_out(name):
    """The fit inside attention is the reference's fit of each row's and head's kept tokens (padding in the middle)."""
    B, L, H = 2, 20, 2
    q = np.stack([np.stack([anisotropic(10 + b * H + h, L) for h in range(H)], 1) for b in range(B)])
    k = np.stack([np.stack([anisotropic(20 + b * H + h, L, SCALES_K) for h in range(H)], 1) for b in range(B)])
    v = normal(5, (B, L, H, 3))
    keep = np.ones((B, L), bool)
    keep[0, 6:9] = False
    keep[1, 12:14] = False
    q[~keep], k[~keep] = 1e3, -1e3  # padding that would dominate every fit
    W = np.asarray(rfa.sample_projection(jax.random.key(2), 8, D))
    out = jax.jit(
        lambda q, k, v: rfa.kernelized_attention(q, k, v, estimator=name, projection=W, mask=keep[:, None, None, :])
    )(q, k, v)
    expected = references.kernelized_attention(q, k, v, name, W, keep_k=keep)
    np.testing.assert_allclose(np.where(keep[..., None, None], out, 0), expected, rtol=2e-4, atol=2e-5)


def test_causal_attention_refuses_to_fit_to_the_sequence():
    q = normal(1, (1, 6, 1, D))
    W = rfa.sample_projection(jax.random.key(0), 8, D)
    with pytest.raises(ValueError, match=r"feature_params\['A'\].*fixed in advance"):
        rfa.kernelized_attention(q, q, q, estimator="sderf", projection=W, is_causal=True)


def test_calibrated_parameters_equal_the_fit_of_the_pooled_batches_and_serve_causal_calls():
    B, L, H = 3, 10, 2
    q, k = normal(1, (B, L, H, D), 0.8), normal(2, (B, L, H, D), 0.4)
    keep = np.ones((B, L), bool)
    keep[1, 7:] = False
    params = rfa.attention.fit_feature_params("aderf", q, k, mask=keep[:, None, None, :])
    scale = D**-0.25
    for h in range(H):
        expected = references.aderf_fit(q[:, :, h][keep] * scale, k[:, :, h][keep] * scale)
        np.testing.assert_allclose(params["query_transform"][h, 0], expected["query_transform"], rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(params["A"][h, 0], expected["A"], rtol=1e-4)

    fn = rfa.make_attention_fn("aderf", 16, head_dim=D, key=jax.random.key(3))
    mha = nnx.MultiHeadAttention(H, H * D, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
    x = normal(4, (B, L, H * D))
    with rfa.layers.calibrating(mha):
        mha(x)
    assert not fn.calibrating
    stored = nnx.state(mha, rfa.layers.FittedParams)
    assert set(stored["attention_fn"]["fitted_params"]) == {"A", "query_transform", "key_transform"}
    causal = mha(x, is_causal=True)  # uses the stored parameters; without them this raises
    q_proj, k_proj, v_proj = (np.asarray(getattr(mha, n)(x)) for n in ("query", "key", "value"))
    stored_params = {n: np.asarray(v[...])[:, 0] for n, v in fn.fitted_params.items()}  # [H, *event]
    expected = references.kernelized_attention(
        q_proj, k_proj, v_proj, "aderf", fn.projection[...], causal=True, **stored_params
    )
    np.testing.assert_allclose(causal, mha.out(expected.astype(np.float32)), rtol=2e-4, atol=2e-5)


def test_calibrating_keeps_one_fit_per_site_and_refuses_a_module_shared_by_sites():
    x = normal(4, (2, 6, 2 * D))

    def encoder(fns):
        layers = nnx.List(
            [
                nnx.MultiHeadAttention(2, 2 * D, attention_fn=fn, decode=False, rngs=nnx.Rngs(i))
                for i, fn in enumerate(fns)
            ]
        )

        def forward(x):
            for layer in layers:
                x = layer(x)
            return x

        return layers, forward

    own = [rfa.make_attention_fn("aderf", 16, head_dim=D, key=jax.random.key(i)) for i in range(2)]
    layers, forward = encoder(own)
    with rfa.layers.calibrating(layers):
        forward(x)
    inputs = [x, layers[0](x)]  # each site's own input: its fit is to its own queries and keys
    for fn, layer, y in zip(own, layers, inputs, strict=True):
        expected = rfa.attention.fit_feature_params("aderf", layer.query(y), layer.key(y))
        np.testing.assert_allclose(fn.fitted_params["A"][...], expected["A"], rtol=1e-5)
    assert not np.allclose(own[0].fitted_params["A"][...], own[1].fitted_params["A"][...])
    shared = rfa.make_attention_fn("aderf", 16, head_dim=D, key=jax.random.key(0))
    layers, _ = encoder([shared, shared])
    with pytest.raises(ValueError, match=r"used by 2 attention sites.*its own rfa\.make_attention_fn"):
        rfa.layers.calibrating(layers).__enter__()


def test_calibrating_a_model_leaves_maps_without_a_fit_alone():
    fn = rfa.make_attention_fn("positive", 16, head_dim=D, key=jax.random.key(3))
    mha = nnx.MultiHeadAttention(2, 2 * D, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
    x = normal(4, (2, 5, 2 * D))
    with rfa.layers.calibrating(mha):
        out = mha(x)
    assert not fn.fitted_params and np.allclose(out, mha(x))


def test_closed_form_overflows_to_inf_not_nan():
    params = fitted("sderf")
    big = np.full((D,), 30.0, np.float32)
    lm = rfa.theory.log_mse("sderf", big, big, 4, **params)
    assert np.isfinite(lm) and lm > 100  # beyond float32's exp, still finite in the log domain
    assert np.isposinf(rfa.theory.mse("sderf", big, big, 4, **params))
