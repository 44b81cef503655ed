import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_as_users_do

import rfa
from rfa.random_features import projections
from rfa.random_features.projections import simplex_vertices


@pytest.mark.parametrize("kind", ["iid", "orthogonal", "simplex"])
@pytest.mark.parametrize("num_features", [5, 16, 37])
def test_shape_and_dtype(kind, num_features):
    W = rfa.sample_projection(jax.random.key(0), num_features, 16, projection_kind=kind, dtype=jnp.bfloat16)
    assert W.shape == (num_features, 16)
    assert W.dtype == jnp.bfloat16


@pytest.mark.parametrize("num_features", [8, 20])
def test_orthogonal_rows_within_blocks(num_features):
    W = np.asarray(rfa.sample_projection(jax.random.key(1), num_features, 8, scaling="sqrt_d"))
    for start in range(0, num_features, 8):
        block = W[start : start + 8]
        gram = block @ block.T
        np.testing.assert_allclose(gram, 8.0 * np.eye(len(block)), atol=1e-4)


def test_blocks_are_independent():
    """No row of block 1 is parallel to one of block 0 (a repeated block would give cosines of exactly 1)."""
    W = np.asarray(rfa.sample_projection(jax.random.key(2), 16, 8, scaling="sqrt_d"))
    cosines = (W[:8] @ W[8:].T) / 8.0
    assert np.abs(cosines).max() < 0.99
    assert np.abs(cosines - np.diag(np.diag(cosines))).max() > 0.3  # and the two blocks are not aligned


@pytest.mark.parametrize("dim", [2, 3, 8])
def test_simplex_rows_within_blocks_point_to_the_vertices_of_a_regular_simplex(dim):
    """Within a block ``w_iᵀw_j = d·(-1/(d-1))`` and the rows sum to 0 (sqrt_d norms); blocks are independent."""
    W = np.asarray(
        rfa.sample_projection(jax.random.key(7), 2 * dim + 1, dim, projection_kind="simplex", scaling="sqrt_d")
    )
    expected = dim * (np.eye(dim) * (1 + 1 / (dim - 1)) - 1 / (dim - 1))
    for block in (W[:dim], W[dim : 2 * dim]):
        np.testing.assert_allclose(block @ block.T, expected, atol=1e-4)
        np.testing.assert_allclose(block.sum(0), 0.0, atol=1e-4)
    assert not np.allclose(np.abs(W[:dim] @ W[dim : 2 * dim].T), dim, atol=1e-3)


def test_simplex_vertices_match_the_papers_construction():
    """Reid et al. (ICML 2023): s_i = √(d/(d-1)) e_i - (√d+1)/(d-1)^{3/2} u for i < d, s_d = u/√(d-1), u = (1,…,1,0)."""
    d = 5
    u = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    rows = [math.sqrt(d / (d - 1)) * np.eye(d)[i] - (math.sqrt(d) + 1) / (d - 1) ** 1.5 * u for i in range(d - 1)]
    np.testing.assert_allclose(simplex_vertices(d), np.stack(rows + [u / math.sqrt(d - 1)]), atol=1e-12)


@pytest.mark.parametrize("kind", ["iid", "orthogonal", "simplex"])
def test_sqrt_d_scaling_fixes_norms(kind):
    W = rfa.sample_projection(jax.random.key(3), 24, 9, projection_kind=kind, scaling="sqrt_d")
    np.testing.assert_allclose(jnp.linalg.norm(W, axis=-1), 3.0, rtol=1e-5)


@pytest.mark.parametrize("kind", ["iid", "orthogonal", "simplex"])
def test_chi_rows_are_marginally_standard_gaussian(kind):
    """E[w wᵀ] = I and E|w|⁴ = d(d+2) for w ~ N(0, I_d): the unbiasedness of every estimator rests on it."""
    draw = jax.jit(jax.vmap(lambda key: rfa.sample_projection(key, 6, 6, projection_kind=kind)))
    W = np.asarray(draw(jax.random.split(jax.random.key(4), 4000)), np.float64).reshape(-1, 6)
    np.testing.assert_allclose(W.T @ W / len(W), np.eye(6), atol=0.04)
    np.testing.assert_allclose(np.mean(np.sum(W * W, -1) ** 2), 48.0, rtol=0.05)


def test_same_key_same_draw_new_key_new_draw():
    a = rfa.sample_projection(jax.random.key(5), 8, 4)
    b = rfa.sample_projection(jax.random.key(5), 8, 4)
    c = rfa.sample_projection(jax.random.key(6), 8, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_raw_uint32_key_is_accepted():
    assert rfa.sample_projection(jax.random.PRNGKey(0), 4, 4).shape == (4, 4)


def test_under_jit_and_vmap():
    fn = jax.jit(rfa.sample_projection, static_argnames=("num_features", "dim", "projection_kind", "scaling"))
    assert fn(jax.random.key(0), num_features=12, dim=5).shape == (12, 5)
    batched = jax.vmap(lambda key: rfa.sample_projection(key, 12, 5, projection_kind="iid"))(
        jax.random.split(jax.random.key(0), 3)
    )
    assert batched.shape == (3, 12, 5)


def test_phases_are_uniform_on_circle():
    b = np.asarray(rfa.sample_phases(jax.random.key(0), 20000))
    assert b.min() >= 0.0 and b.max() < 2 * np.pi
    np.testing.assert_allclose(b.mean(), np.pi, atol=0.05)


def test_a_registered_kind_is_sampled_with_either_scaling_and_named_once():
    """A kind of Gaussian rows (here: every row the same draw, so the registry's use of the rows shows) keeps them
    under chi and rescales them under sqrt_d; a name is registered once, and an unknown one is refused."""
    name = "test_repeated_row"
    projections.register_projection_kind(
        name, lambda key, m, d: jnp.broadcast_to(jax.random.normal(key, (d,)), (m, d)), gaussian=True
    )
    try:
        W = rfa.sample_projection(jax.random.key(0), 5, 4, projection_kind=name)
        assert bool(jnp.all(W[0] == W)) and float(jnp.std(W[0])) > 0
        S = rfa.sample_projection(jax.random.key(0), 5, 4, projection_kind=name, scaling="sqrt_d")
        np.testing.assert_allclose(S, W / jnp.linalg.norm(W[0]) * 2.0, rtol=1e-6)
        with pytest.raises(rfa.InputError, match="already registered"):
            projections.register_projection_kind(name, lambda key, m, d: None, gaussian=True)
    finally:
        del projections.PROJECTION_KINDS[name]
    with pytest.raises(rfa.InputError, match="kind must be one of"):
        rfa.sample_projection(jax.random.key(0), 5, 4, projection_kind=name)


@pytest.mark.parametrize("kind", ["orthogonal", "iid"])
def test_a_one_dimensional_projection_is_a_column_of_signed_norms(kind):
    W = np.asarray(rfa.sample_projection(jax.random.key(0), 6, 1, projection_kind=kind), np.float64)
    assert W.shape == (6, 1) and len(np.unique(W)) == 6  # only the simplex needs d >= 2


def test_the_keyword_of_before_0_3_draws_the_same_rows_with_a_warning():
    """``kind=`` is ``projection_kind=`` (docs/changelog.md), for sample_projection and Estimator.draw."""
    key = jax.random.key(5)
    with pytest.warns(DeprecationWarning, match=r"sample_projection\(kind=...\) is sample_projection\(projection_kind"):
        old = rfa.sample_projection(key, 6, 4, kind="simplex")
    np.testing.assert_array_equal(old, rfa.sample_projection(key, 6, 4, projection_kind="simplex"))
    with pytest.warns(DeprecationWarning, match=r"Estimator.draw\(kind=...\)"):
        W, _ = rfa.estimator("positive").draw(key, 6, 4, kind="iid")
    np.testing.assert_array_equal(W, rfa.sample_projection(key, 6, 4, projection_kind="iid"))
    with pytest.raises(TypeError, match="got kind= and projection_kind="):
        rfa.sample_projection(key, 6, 4, kind="iid", projection_kind="iid")


DECOMPOSITIONS_AT_ONCE = """
import jax, jax.numpy as jnp, rfa
from rfa.attention import fit_feature_params

@jax.jit
def draw_and_fit(key, q, k):  # independent QRs and eighs, which XLA may run at once on its thread pool
    a, b = jax.random.split(key)
    w = [rfa.sample_projection(part, 256, 32, projection_kind="orthogonal") for part in (a, b)]
    fits = [fit_feature_params("sderf", x, y)["query_transform"] for x, y in ((q, k), (k, q))]
    return sum(jnp.sum(x) for x in w + fits)

q = jax.random.normal(jax.random.key(1), (4, 16, 16, 32))
for i in range(300):
    jax.block_until_ready(draw_and_fit(jax.random.key(i), q, 0.5 * q))
"""


@pytest.mark.slow
def test_decompositions_run_at_once_do_not_deadlock_the_cpu_thread_pool():
    # jaxlib's batched LAPACK kernels wait on XLA's intra-op pool; two at once filled a 2-thread pool and hung
    # (rfa.random_features.lapack). The fixed program takes seconds; the hang came within a minute on 2 cores.
    run_as_users_do(DECOMPOSITIONS_AT_ONCE, timeout=120, what="two orthogonal projections and two SDERF fits")
