"""Bad input raises a ValueError or TypeError naming the argument, what was received and what was expected.

One test id per case. Every ``match`` pattern checks that the message names the offending argument and
the value or shape it received, so a raw XLA/JAX error (or a message that does not say what went wrong)
fails the test.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rfa
from rfa import attention

D = 8  # head dim / input dim used throughout
M = 16  # random vectors


def _msg(*fragments: str) -> str:
    """Regex matching the literal ``fragments`` in this order, anything in between."""
    return ".*".join(re.escape(f) for f in fragments)


def _key(seed: int = 0) -> jax.Array:
    return jax.random.key(seed)


def _projection(num_features: int = M, dim: int = D) -> jax.Array:
    return rfa.sample_projection(_key(1), num_features, dim, projection_kind="iid")


def _x(*shape: int, dtype=jnp.float32) -> jax.Array:
    shape = shape or (3, D)
    return (0.1 * jnp.ones(shape, jnp.float32)).astype(dtype)


def _qkv(q_shape=(2, 5, 4, D), k_shape=None, v_shape=None, q_dtype=jnp.float32):
    k_shape = k_shape or q_shape
    v_shape = v_shape or k_shape
    return _x(*q_shape, dtype=q_dtype), _x(*k_shape), _x(*v_shape)


# ---------------------------------------------------------------------------------------------------
# rfa.sample_projection / rfa.sample_phases
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        pytest.param({"num_features": 0}, ValueError, _msg("num_features", ">= 1", "got 0"), id="num_features=0"),
        pytest.param({"num_features": -3}, ValueError, _msg("num_features", ">= 1", "got -3"), id="num_features=-3"),
        pytest.param({"num_features": 2.5}, TypeError, _msg("num_features", "int", "2.5"), id="num_features=2.5"),
        pytest.param({"num_features": True}, TypeError, _msg("num_features", "int", "True"), id="num_features=True"),
        pytest.param({"dim": 0}, ValueError, _msg("dim", ">= 1", "got 0"), id="dim=0"),
        pytest.param(
            {"projection_kind": "random"},
            ValueError,
            _msg("projection_kind", "orthogonal", "got 'random'"),
            id="unknown-kind",
        ),
        pytest.param({"scaling": "unit"}, ValueError, _msg("scaling", "chi", "got 'unit'"), id="unknown-scaling"),
        pytest.param(
            {"projection_kind": "simplex", "dim": 1},
            ValueError,
            _msg("simplex", "dim >= 2", "dim=1"),
            id="simplex-dim=1",
        ),
        pytest.param({"dtype": jnp.int32}, TypeError, _msg("dtype", "floating", "int32"), id="integer-dtype"),
        pytest.param({"key": 0}, TypeError, _msg("key", "PRNG key", "got int"), id="key=int"),
        pytest.param(
            {"key": jnp.zeros(2)}, TypeError, _msg("key", "PRNG key", "float32", "(2,)"), id="key=float-array"
        ),
        pytest.param(
            {"key": jax.random.split(jax.random.key(0))}, TypeError, _msg("key", "single", "(2,)"), id="key=batch"
        ),
    ],
)
def test_sample_projection_bad_argument(kwargs, error, pattern):
    args = {"key": _key(), "num_features": M, "dim": D} | kwargs
    with pytest.raises(error, match=pattern):
        rfa.sample_projection(**args)


def test_sample_phases_num_features_zero():
    with pytest.raises(ValueError, match=_msg("num_features", ">= 1", "got 0")):
        rfa.sample_phases(_key(), 0)


# ---------------------------------------------------------------------------------------------------
# rfa.estimator / FeatureMap.__call__
# ---------------------------------------------------------------------------------------------------


def test_estimator_unknown_name():
    with pytest.raises(ValueError, match=_msg("unknown estimator 'nope'", "registered", "positive")):
        rfa.estimator("nope")


def test_feature_map_integer_x():
    with pytest.raises(TypeError, match=_msg("x", "floating", "int32")):
        rfa.estimator("positive")(_x(3, D, dtype=jnp.int32), _projection())


def test_feature_map_integer_projection():
    with pytest.raises(TypeError, match=_msg("projection", "floating", "int32")):
        rfa.estimator("positive")(_x(), _projection().astype(jnp.int32))


def test_feature_map_projection_wrong_rank():
    with pytest.raises(ValueError, match=_msg("projection", "rank 2", "[m, d]", f"({M}, {D}, 1)")):
        rfa.estimator("positive")(_x(), _projection()[..., None])


def test_feature_map_projection_dim_mismatch():
    with pytest.raises(ValueError, match=_msg("projection", f"d = x.shape[-1] = {D}", f"({M}, {D + 1})")):
        rfa.estimator("positive")(_x(), _projection(dim=D + 1))


def test_feature_map_missing_projection():
    with pytest.raises(ValueError, match=_msg("'positive'", "projection", "[m, d]")):
        rfa.estimator("positive")(_x(), None)


def test_feature_map_projection_for_deterministic_map():
    with pytest.raises(ValueError, match=_msg("'elu'", "no projection", "None")):
        rfa.estimator("elu")(_x(), _projection())


def test_feature_map_unknown_parameter():
    with pytest.raises(TypeError, match=_msg("'positive'", "unknown parameter", "['A']", "accepts")):
        rfa.estimator("positive")(_x(), _projection(), A=-0.1)


def test_feature_map_gerf_missing_a():
    with pytest.raises(TypeError, match=_msg("'gerf'", "needs", "['A']")):
        rfa.estimator("gerf")(_x(), _projection())


@pytest.mark.parametrize("A", [pytest.param(0.125, id="A=0.125"), pytest.param(0.2, id="A=0.2")])
def test_feature_map_gerf_a_too_large(A):
    with pytest.raises(ValueError, match=_msg("A", "< 1/8", f"got {A}")):
        rfa.estimator("gerf")(_x(), _projection(), A=A)


def test_feature_map_gaussian_cosine_phases_wrong_shape():
    phases = rfa.sample_phases(_key(2), M // 2)
    with pytest.raises(ValueError, match=_msg("phases", f"({M},)", f"got ({M // 2},)")):
        rfa.estimator("gaussian_cosine")(_x(), _projection(), phases=phases)


# ---------------------------------------------------------------------------------------------------
# rfa.softmax_kernel / gaussian_kernel / estimate_softmax_kernel / estimate_gaussian_kernel
# ---------------------------------------------------------------------------------------------------

KERNELS = [
    pytest.param(rfa.softmax_kernel, id="softmax_kernel"),
    pytest.param(rfa.gaussian_kernel, id="gaussian_kernel"),
    pytest.param(lambda x, y: rfa.estimate_softmax_kernel(x, y, _projection()), id="estimate_softmax_kernel"),
    pytest.param(lambda x, y: rfa.estimate_gaussian_kernel(x, y, _projection()), id="estimate_gaussian_kernel"),
]


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_last_dim_mismatch(kernel):
    with pytest.raises(ValueError, match=_msg("x and y", "last axis", f"x.shape=(3, {D})", f"y.shape=(3, {D + 1})")):
        kernel(_x(3, D), _x(3, D + 1))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_integer_input(kernel):
    with pytest.raises(TypeError, match=_msg("x", "floating", "int32")):
        kernel(_x(3, D, dtype=jnp.int32), _x(3, D))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_scalar_input(kernel):
    with pytest.raises(ValueError, match=_msg("y", "rank >= 1", "got shape ()")):
        kernel(_x(D), jnp.float32(1.0))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_batch_dims_not_broadcastable(kernel):
    with pytest.raises(ValueError, match=_msg("x batch dims", "(3,)", "y batch dims", "(2,)", "broadcast")):
        kernel(_x(3, D), _x(2, D))


def test_estimate_softmax_kernel_with_gaussian_estimator():
    with pytest.raises(ValueError, match=_msg("estimator 'gaussian_trig'", "softmax", "gaussian")):
        rfa.estimate_softmax_kernel(_x(), _x(), _projection(), estimator="gaussian_trig")


def test_estimate_gaussian_kernel_with_softmax_estimator():
    with pytest.raises(ValueError, match=_msg("estimator 'positive'", "gaussian", "softmax")):
        rfa.estimate_gaussian_kernel(_x(), _x(), _projection(), estimator="positive")


def test_estimate_softmax_kernel_unknown_estimator():
    with pytest.raises(ValueError, match=_msg("unknown estimator 'nope'", "registered")):
        rfa.estimate_softmax_kernel(_x(), _x(), _projection(), estimator="nope")


# ---------------------------------------------------------------------------------------------------
# rfa.theory and rfa.optimal_gerf_parameter
# ---------------------------------------------------------------------------------------------------

MSE_FUNCTIONS = [pytest.param(rfa.theory.mse, id="mse"), pytest.param(rfa.theory.log_mse, id="log_mse")]


@pytest.mark.parametrize("mse", MSE_FUNCTIONS)
@pytest.mark.parametrize(
    "estimator, num_features, kwargs, error, pattern",
    [
        pytest.param("nope", M, {}, ValueError, _msg("estimator", "positive", "got 'nope'"), id="unknown-estimator"),
        pytest.param("positive", 0, {}, ValueError, _msg("num_features", ">= 1", "got 0"), id="num_features=0"),
        pytest.param("positive", M, {"num_terms": 0}, ValueError, _msg("num_terms", ">= 1", "got 0"), id="num_terms=0"),
        pytest.param(
            "trig",
            M,
            {"orthogonal": True},
            ValueError,
            _msg("'trig'", "['iid']", "projection_kind='orthogonal'"),
            id="orth-trig",
        ),
        pytest.param(
            "trig",
            M,
            {"projection_kind": "simplex"},
            ValueError,
            _msg("'trig'", "['iid']", "projection_kind='simplex'"),
            id="simplex-trig",
        ),
        pytest.param(
            "positive", M, {"projection_kind": "sparse"}, ValueError, _msg("projection_kind", "got 'sparse'"), id="proj"
        ),
        pytest.param(
            "positive",
            M,
            {"orthogonal": True, "projection_kind": "simplex"},
            ValueError,
            _msg("orthogonal=True", "projection_kind='simplex'"),
            id="orth-and-simplex",
        ),
        pytest.param("relu", M, {}, ValueError, _msg("estimator", "positive", "got 'relu'"), id="no-closed-form"),
        pytest.param("gerf", M, {}, TypeError, _msg("'gerf'", "needs", "['A']"), id="gerf-missing-A"),
        pytest.param(
            "positive", M, {"A": -0.1}, TypeError, _msg("'positive'", "unknown", "['A']"), id="positive-given-A"
        ),
        pytest.param("gerf", M, {"A": 0.125}, ValueError, _msg("A", "< 1/8", "got 0.125"), id="A=0.125"),
        pytest.param("gerf", M, {"A": 0.2}, ValueError, _msg("A", "< 1/8", "got 0.2"), id="A=0.2"),
    ],
)
def test_theory_mse_bad_argument(mse, estimator, num_features, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        mse(estimator, _x(), _x(), num_features, **kwargs)


@pytest.mark.parametrize("mse", MSE_FUNCTIONS)
def test_theory_mse_last_dim_mismatch(mse):
    with pytest.raises(ValueError, match=_msg("x and y", f"x.shape=(3, {D})", f"y.shape=(3, {D + 1})")):
        mse("positive", _x(3, D), _x(3, D + 1), M)


# ---------------------------------------------------------------------------------------------------
# DERF (aderf, saderf, sderf): fits, parameters, closed forms
# ---------------------------------------------------------------------------------------------------


def _derf_params(name="aderf"):
    q = jax.random.normal(jax.random.key(0), (32, D)) * jnp.linspace(0.2, 1.0, D)
    return {n: v[0] for n, v in rfa.estimator(name).fit(q, q[::-1] * 0.5).items()}


@pytest.mark.parametrize("name", ["aderf", "saderf", "sderf"])
@pytest.mark.parametrize("side", ["q", "k"])
def test_derf_fit_from_one_vector(name, side):
    many, one = _x(4, D), _x(1, D)
    q, k = (one, many) if side == "q" else (many, one)
    with pytest.raises(ValueError, match=_msg("at least 2 queries and 2 keys", f"{side} has 1")):
        rfa.estimator(name).fit(q, k)


@pytest.mark.parametrize("name", ["aderf", "saderf"])
def test_derf_fit_not_positive_definite(name):
    with pytest.raises(ValueError, match=_msg("not positive definite", "second moment of q")):
        rfa.estimator(name).fit(jnp.zeros((5, D)), _x(5, D))


def test_derf_a_too_large():
    params = {**_derf_params(), "A": jnp.full((D,), 0.2)}
    with pytest.raises(ValueError, match=_msg("A", "< 1/8")):
        rfa.estimator("aderf")(_x(), rfa.sample_projection(jax.random.key(0), M, D), **params)


def test_derf_one_transform_without_the_other():
    params = _derf_params()
    del params["key_transform"]
    with pytest.raises(ValueError, match=_msg("query_transform and key_transform together")):
        rfa.estimator("aderf")(_x(), rfa.sample_projection(jax.random.key(0), M, D), **params)


def test_derf_transform_of_the_wrong_dimension():
    params = {"A": -0.05, "query_transform": jnp.eye(D + 1), "key_transform": jnp.eye(D + 1)}
    with pytest.raises(ValueError, match=_msg("transforms", "[..., d, d]", f"d = {D}", f"({D + 1}, {D + 1})")):
        rfa.estimator("aderf")(_x(), rfa.sample_projection(jax.random.key(0), M, D), **params)


def test_derf_closed_form_without_parameters():
    with pytest.raises(TypeError, match=_msg("DERF closed form needs the fitted parameters")):
        rfa.theory.log_mse("aderf", _x(), _x(), M)


def test_sderf_closed_form_with_orthogonal_rows():
    with pytest.raises(ValueError, match=_msg("'sderf'", "['iid']", "projection_kind='orthogonal'")):
        rfa.theory.log_mse("sderf", _x(), _x(), M, projection_kind="orthogonal", **_derf_params("sderf"))


def test_aderf_closed_form_with_coupled_rows_and_a_per_coordinate():
    params = {**_derf_params(), "A": jnp.full((D,), -0.05)}
    with pytest.raises(ValueError, match=_msg("projection_kind='simplex'", "one A for every coordinate", f"({D},)")):
        rfa.theory.log_mse("aderf", _x(), _x(), M, projection_kind="simplex", **params)


@pytest.mark.parametrize("name", ["aderf", "saderf", "sderf"])
def test_causal_derf_without_parameters(name):
    q = _x(1, 6, 2, D)
    with pytest.raises(ValueError, match=_msg(f"{name!r} in causal", "feature_params['A']", "fixed in advance")):
        rfa.kernelized_attention(
            q, q, q, estimator=name, projection=rfa.sample_projection(jax.random.key(0), M, D), is_causal=True
        )


def test_fit_feature_params_of_a_map_without_a_fit():
    q = _x(1, 6, 2, D)
    with pytest.raises(ValueError, match=_msg("'positive' fits no parameters")):
        attention.fit_feature_params("positive", q, q)


def test_orthogonal_mse_bound_num_features_above_dim():
    with pytest.raises(ValueError, match=_msg("num_features", f"<= d = {D}", f"num_features={D + 1}")):
        rfa.theory.orthogonal_mse_bound(_x(), _x(), D + 1)


def test_optimal_gerf_parameter_negative_phi_sq():
    with pytest.raises(ValueError, match=_msg("phi_sq", ">= 0", "-1.0")):
        rfa.optimal_gerf_parameter(jnp.array([1.0, -1.0]), D)


def test_optimal_gerf_parameter_dim_zero():
    with pytest.raises(ValueError, match=_msg("dim", ">= 1", "got 0")):
        rfa.optimal_gerf_parameter(1.0, 0)


# ---------------------------------------------------------------------------------------------------
# rfa.softmax_attention and rfa.kernelized_attention
# ---------------------------------------------------------------------------------------------------


def _kernelized(q, k, v, **kwargs):
    kwargs.setdefault("estimator", "positive")
    kwargs.setdefault("projection", _projection(dim=q.shape[-1]))
    return rfa.kernelized_attention(q, k, v, **kwargs)


ATTENTIONS = [
    pytest.param(rfa.softmax_attention, id="softmax_attention"),
    pytest.param(_kernelized, id="kernelized_attention"),
    pytest.param(
        lambda q, k, v, **kwargs: attention.naive_kernelized_attention(
            q, k, v, estimator="positive", projection=_projection(dim=q.shape[-1]), **kwargs
        ),
        id="naive",
    ),
]

BSHD = (2, 5, 4, D)  # [batch, length, heads, head_dim]


def _case(case_id, error, pattern, *, q=BSHD, k=None, v=None, q_dtype=jnp.float32, **call_kwargs):
    """One bad attention call: q/k/v shapes (k defaults to q's, v to k's) and extra call kwargs."""
    return pytest.param((q, k, v, q_dtype), call_kwargs, error, pattern, id=case_id)


ATTENTION_CASES = [
    _case(
        "q-rank-2",
        ValueError,
        _msg("q", "rank >= 3", "[batch..., q_len, heads, d_k]", f"got shape (5, {D})"),
        q=(5, D),
        k=BSHD,
    ),
    _case(
        "head-dim-mismatch",
        ValueError,
        _msg("q and k", "head dim", f"q.shape=(2, 5, 4, {D})", f"k.shape=(2, 5, 4, {D + 2})"),
        k=(2, 5, 4, D + 2),
    ),
    _case(
        "kv-length-mismatch",
        ValueError,
        _msg("k and v", "kv_len", f"k.shape=(2, 5, 4, {D})", f"v.shape=(2, 6, 4, {D})"),
        v=(2, 6, 4, D),
    ),
    _case(
        "kv-batch-mismatch",
        ValueError,
        _msg("k and v", "batch", f"k.shape=(2, 5, 4, {D})", f"v.shape=(3, 5, 4, {D})"),
        v=(3, 5, 4, D),
    ),
    _case(
        "qk-batch-mismatch",
        ValueError,
        _msg("q and k", "batch", f"q.shape=(2, 5, 4, {D})", f"k.shape=(3, 5, 4, {D})"),
        k=(3, 5, 4, D),
    ),
    _case(
        "heads-mismatch",
        ValueError,
        _msg("q and k", "heads", f"q.shape=(2, 5, 4, {D})", f"k.shape=(2, 5, 3, {D})"),
        k=(2, 5, 3, D),
    ),
    _case("integer-q", TypeError, _msg("q", "floating", "int32"), q_dtype=jnp.int32),
    _case(
        "mask-string-dtype", TypeError, _msg("mask", "bool or numeric dtype", "<U1"), mask=np.full((2, 1, 1, 5), "x")
    ),
    _case("mask-not-array", TypeError, _msg("mask", "must be an array", "list"), mask=[[True] * 5]),
    _case(
        "mask-wrong-kv-len",
        ValueError,
        _msg("mask", "[batch..., heads, q_len, kv_len] = (2, 4, 5, 5)", "got shape (2, 1, 1, 7)"),
        mask=jnp.ones((2, 1, 1, 7), jnp.bool_),
    ),
    _case(
        "mask-too-many-dims",
        ValueError,
        _msg("mask", "broadcastable", "got shape (3, 2, 1, 1, 5)"),
        mask=jnp.ones((3, 2, 1, 1, 5), jnp.bool_),
    ),
    _case(
        "causal-length-mismatch",
        ValueError,
        _msg("is_causal=True", "q_len == kv_len", "q_len=5", "kv_len=6"),
        k=(2, 6, 4, D),
        is_causal=True,
    ),
]


@pytest.mark.parametrize("attend", ATTENTIONS)
@pytest.mark.parametrize("shapes, kwargs, error, pattern", ATTENTION_CASES)
def test_attention_bad_input(attend, shapes, kwargs, error, pattern):
    q, k, v = _qkv(*shapes)
    with pytest.raises(error, match=pattern):
        attend(q, k, v, **kwargs)


@pytest.mark.parametrize(
    ("mask", "pattern"),
    [
        (np.tril(np.ones((5, 5))) - np.tril(np.ones((5, 5)), -2), "lower-triangular but not causal"),
        (np.triu(np.ones((5, 5), bool)), "upper-triangular"),
        (np.eye(5, k=2, dtype=bool) | np.eye(5, k=-2, dtype=bool), "a dense pattern"),
    ],
)
def test_kernelized_attention_unsupported_mask(mask, pattern):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=_msg("cannot apply this mask", "(1, 1, 5, 5)", pattern, "exact attention")):
        _kernelized(q, k, v, mask=mask)


def test_kernelized_attention_mask_mixing_patterns_across_batch():
    q, k, v = _qkv()
    mask = np.stack([np.ones((5, 5), bool), np.tril(np.ones((5, 5), bool))])[:, None]
    with pytest.raises(ValueError, match=_msg("(2, 1, 5, 5)", "mixes padding slices and causal slices")):
        _kernelized(q, k, v, mask=mask)


def test_kernelized_attention_chunk_size_zero():
    with pytest.raises(ValueError, match=_msg("chunk_size", ">= 1", "got 0")):
        _kernelized(*_qkv(), is_causal=True, chunk_size=0)


def test_kernelized_attention_integer_compute_dtype():
    with pytest.raises(ValueError, match=_msg("kernelized_attention", "compute_dtype", "floating", "int32")):
        _kernelized(*_qkv(), is_causal=True, compute_dtype=jnp.int32)


def test_kernelized_attention_unknown_feature_map():
    with pytest.raises(ValueError, match=_msg("unknown estimator 'nope'", "registered")):
        _kernelized(*_qkv(), estimator="nope")


def test_kernelized_attention_projection_dim_mismatch():
    with pytest.raises(ValueError, match=_msg("projection", f"= {D}", f"got ({M}, {D + 1})")):
        _kernelized(*_qkv(), projection=_projection(dim=D + 1))


def test_kernelized_attention_oprf_causal_needs_phi_sq():
    with pytest.raises(ValueError, match=_msg("'oprf'", "causal", "feature_params['phi_sq']")):
        _kernelized(*_qkv(), estimator="oprf", is_causal=True)


def test_kernelized_attention_gerf_a_too_large():
    with pytest.raises(ValueError, match=_msg("A", "< 1/8", "got 0.2")):
        _kernelized(*_qkv(), estimator="gerf", feature_params={"A": 0.2})


# ---------------------------------------------------------------------------------------------------
# rfa.attention.init_state, initial_state=, log_decay=
# ---------------------------------------------------------------------------------------------------


def test_init_state_num_outputs_zero():
    with pytest.raises(ValueError, match=_msg("num_outputs", ">= 1", "got 0")):
        attention.init_state((2,), 4, 0, D)


@pytest.mark.parametrize(
    "batch_shape",
    [pytest.param(2, id="int"), pytest.param((2, 0), id="zero-dim"), pytest.param((2.0,), id="float-dim")],
)
def test_init_state_bad_batch_shape(batch_shape):
    with pytest.raises((ValueError, TypeError), match=_msg("batch_shape", "ints >= 1", f"got {batch_shape!r}")):
        attention.init_state(batch_shape, 4, M, D)


def test_initial_state_wrong_feature_count():
    state = attention.init_state((2,), 4, 2 * M, D)
    with pytest.raises(ValueError, match=_msg("initial_state", f"F = {2 * M}", "'positive'", f"num_outputs={M}")):
        _kernelized(*_qkv(), is_causal=True, initial_state=state)


def test_initial_state_of_another_batch():
    state = attention.init_state((3,), 4, M, D)
    with pytest.raises(ValueError, match=_msg("initial_state.kv", "(2, 4) + (F, 9)", f"(3, 4, {M}, {D + 1})")):
        _kernelized(*_qkv(), is_causal=True, initial_state=state)


def test_initial_state_not_a_state():
    with pytest.raises(TypeError, match=_msg("initial_state", "RecurrentState", "dict")):
        _kernelized(*_qkv(), is_causal=True, initial_state={"kv": 0})


def test_initial_state_log_reference_wrong_shape():
    state = attention.init_state((2,), 4, M, D)._replace(log_reference=jnp.zeros((2,)))
    with pytest.raises(ValueError, match=_msg("initial_state.log_reference", "(2, 4)", "got (2,)")):
        _kernelized(*_qkv(), is_causal=True, initial_state=state)


@pytest.mark.parametrize("fn", [_kernelized, attention.naive_kernelized_attention], ids=["kernelized", "naive"])
def test_oprf_with_a_state_needs_phi_sq(fn):
    state = attention.init_state((2,), 4, M, D)
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=_msg("'oprf'", "with a state", "feature_params['phi_sq']")):
        fn(q, k[:, :0], v[:, :0], estimator="oprf", projection=_projection(), initial_state=state)


@pytest.mark.parametrize("fn", [_kernelized, attention.naive_kernelized_attention], ids=["kernelized", "naive"])
@pytest.mark.parametrize(
    ("log_decay", "kwargs", "error", "pattern"),
    [
        (np.full((2, 5, 4), 0.1), {}, ValueError, ("log_decay", "<= 0", "0.1", "log_sigmoid")),
        (np.zeros((2, 5, 3)), {}, ValueError, ("log_decay", "[batch..., q_len, heads] = (2, 5, 4)", "(2, 5, 3)")),
        (np.zeros((3, 2, 5, 4, 1)), {}, ValueError, ("log_decay", "broadcastable", "(3, 2, 5, 4, 1)")),
        (np.zeros((2, 5, 4, 7)), {}, ValueError, ("log_decay has 7 decays per token and head", "F = ")),
        (np.zeros((2, 5, 4), np.int32), {}, TypeError, ("log_decay", "floating", "int32")),
        (np.zeros((2, 5, 4)), {"is_causal": False}, ValueError, ("log_decay", "is_causal=True", "j <= i")),
    ],
    ids=["positive", "wrong-heads", "too-many-dims", "wrong-features", "integer", "bidirectional"],
)
def test_log_decay_bad_input(fn, log_decay, kwargs, error, pattern):
    kwargs = {"is_causal": True, **kwargs}
    with pytest.raises(error, match=_msg(*pattern)):
        fn(*_qkv(), estimator="positive", projection=_projection(), log_decay=log_decay, **kwargs)


# ---------------------------------------------------------------------------------------------------
# rfa.make_attention_fn
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, pattern",
    [
        pytest.param(("positive", 0), {}, ValueError, _msg("num_features", ">= 1", "got 0"), id="num_features=0"),
        pytest.param(("positive", M), {"head_dim": 0}, ValueError, _msg("head_dim", ">= 1", "got 0"), id="head_dim=0"),
        pytest.param(("positive", M), {"key": None}, ValueError, _msg("'positive'", "key"), id="missing-key"),
        pytest.param(
            ("nope", M), {}, ValueError, _msg("unknown estimator 'nope'", "registered"), id="unknown-estimator"
        ),
        pytest.param(
            ("positive", M), {"chunk_size": 0}, ValueError, _msg("chunk_size", ">= 1", "got 0"), id="chunk_size=0"
        ),
        pytest.param(
            ("positive", M),
            {"projection_kind": "random"},
            ValueError,
            _msg("projection_kind", "orthogonal", "got 'random'"),
            id="unknown-projection_kind",
        ),
    ],
)
def test_make_attention_fn_bad_argument(args, kwargs, error, pattern):
    kwargs = {"head_dim": D, "key": _key()} | kwargs
    with pytest.raises(error, match=pattern):
        rfa.make_attention_fn(*args, **kwargs)


def _attention_fn():
    return rfa.make_attention_fn("positive", M, head_dim=D, key=_key())


def test_attention_fn_with_bias():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=_msg("bias", "None")):
        _attention_fn()(q, k, v, bias=jnp.zeros((2, 4, 5, 5)))


def test_attention_fn_with_dropout():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=_msg("dropout", "dropout_rate=0.1")):
        _attention_fn()(q, k, v, dropout_rate=0.1, deterministic=False)


def test_attention_fn_head_dim_mismatch():
    q, k, v = _qkv((2, 5, 4, D + 2))
    with pytest.raises(ValueError, match=_msg("query", f"head_dim={D}", f"query.shape=(2, 5, 4, {D + 2})")):
        _attention_fn()(q, k, v)


# ---------------------------------------------------------------------------------------------------
# rfa.renormalize
# ---------------------------------------------------------------------------------------------------


def test_renormalize_normalizer_wrong_shape():
    numerator = _x(2, 5, 4, D)
    with pytest.raises(ValueError, match=_msg("normalizer", "(2, 5, 4)", "got (2, 5)")):
        rfa.renormalize(numerator, _x(2, 5))


def test_renormalize_integer_normalizer():
    with pytest.raises(TypeError, match=_msg("normalizer", "floating", "int32")):
        rfa.renormalize(_x(2, 5, 4, D), _x(2, 5, 4, dtype=jnp.int32))


# ---------------------------------------------------------------------------------------------------
# Under jax.jit the same errors are raised at trace time (static arguments, or shapes known at trace time).
# ---------------------------------------------------------------------------------------------------


def _jit_cases():
    q, k, v = _qkv()
    W = _projection()
    return {
        "sample_projection-static-num_features": (
            lambda: jax.jit(rfa.sample_projection, static_argnums=(1, 2))(_key(), 0, D),
            ValueError,
            _msg("num_features", ">= 1", "got 0"),
        ),
        "softmax_kernel-shape": (
            lambda: jax.jit(rfa.softmax_kernel)(_x(3, D), _x(3, D + 1)),
            ValueError,
            _msg("x and y", f"y.shape=(3, {D + 1})"),
        ),
        "softmax_attention-heads": (
            lambda: jax.jit(rfa.softmax_attention)(q, _x(2, 5, 3, D), _x(2, 5, 3, D)),
            ValueError,
            _msg("q and k", "heads", f"k.shape=(2, 5, 3, {D})"),
        ),
        "kernelized_attention-static-chunk_size": (
            lambda: jax.jit(rfa.kernelized_attention, static_argnames=("estimator", "is_causal", "chunk_size"))(
                q, k, v, estimator="positive", projection=W, is_causal=True, chunk_size=0
            ),
            ValueError,
            _msg("chunk_size", "got 0"),
        ),
        "estimator-static-A": (
            lambda: jax.jit(lambda x: rfa.estimator("gerf")(x, W, A=0.2))(_x()),
            ValueError,
            _msg("A", "< 1/8", "got 0.2"),
        ),
        "theory-static-A": (
            lambda: jax.jit(lambda x: rfa.theory.mse("gerf", x, x, M, A=0.125))(_x()),
            ValueError,
            _msg("A", "< 1/8", "got 0.125"),
        ),
        "renormalize-shape": (
            lambda: jax.jit(rfa.renormalize)(_x(2, 5, 4, D), _x(2, 5)),
            ValueError,
            _msg("normalizer", "got (2, 5)"),
        ),
    }


@pytest.mark.parametrize("case", list(_jit_cases()))
def test_jit_raises_same_error_at_trace_time(case):
    call, error, pattern = _jit_cases()[case]
    with pytest.raises(error, match=pattern) as excinfo:
        call()
    assert isinstance(excinfo.value, rfa.InputError), f"got a {type(excinfo.value).__name__}, not an rfa.InputError"


def test_numpy_inputs_are_checked_like_jax_arrays():
    with pytest.raises(TypeError, match=_msg("x", "floating", "int64")):
        rfa.softmax_kernel(np.ones((3, D), np.int64), np.ones((3, D), np.float32))


# ---------------------------------------------------------------------------------------------------
# learned and Taylor maps
# ---------------------------------------------------------------------------------------------------


def test_hedgehog_feature_dimension_zero():
    q, k, v = _qkv()
    params = {"weight": jnp.zeros((4, 1, D, 0))}
    with pytest.raises(ValueError, match=_msg("hedgehog's weight", "feature_dim >= 1", f"(4, 1, {D}, 0)")):
        rfa.kernelized_attention(q, k, v, estimator="hedgehog", projection=None, feature_params=params)


def test_hedgehog_without_weight():
    with pytest.raises(TypeError, match=_msg("'hedgehog'", "needs the parameter", "weight")):
        rfa.kernelized_attention(*_qkv(), estimator="hedgehog", projection=None)


def test_taylor_on_a_head_dimension_too_large():
    q, k, v = _qkv((2, 5, 4, 128))
    with pytest.raises(ValueError, match=_msg("taylor", "d = 128", "8385", "head dimension <= 64", "Based")):
        rfa.kernelized_attention(q, k, v, estimator="taylor", projection=None)
