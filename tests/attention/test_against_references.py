"""Every kernelized mode and map held to the independent float64 reference and to rfa's naive form.

Modes: bidirectional self-attention (padding in the middle), cross-attention (padding in the middle
of the memory), chunked causal without and with decay (left padding and a hole, several chunks and
a padded tail), recurrent (one token per call, carrying the state) with decay, prefill then a read
of the state, and a continuation (chunked, then a token in its own call, then chunked again, passing one
state) with decay; and the quadratic reference ``rfa.attention.naive_kernelized_attention`` itself.
Gradients of ``Σ out ⊙ G`` w.r.t. q, k, v, the projection W, gerf's A and the log-decays are compared
as directional derivatives with central differences of the float64 reference, in which OPRF's data
statistic is held fixed (it is a statistic: no gradient). Each mode's final state and gradients
(the initial state's included) also equal those of the naive form. Everything runs under ``jit``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal, tiered

import rfa
from rfa.attention import init_state, naive_kernelized_attention

B, H, D, M = 2, 2, 8, 16
L, L_MEMORY, L_QUERIES = 9, 11, 5
MAPS = ["trig", "positive", "hyperbolic", "gerf", "oprf", "relu", "elu", "hybrid", "sderf", "taylor", "rfa", "hedgehog"]
MODES = [
    "bidirectional",
    "cross",
    "causal",
    "causal_decay",
    "recurrent_decay",
    "prefill_attend",
    "continued_decay",
    "naive_bidirectional",
    "naive_causal_decay",
]
DECAY_MODES = {"causal_decay", "recurrent_decay", "continued_decay", "naive_causal_decay"}
CAUSAL_MODES = {"causal"} | DECAY_MODES
STATE_MODES = {"causal", "causal_decay", "recurrent_decay", "prefill_attend", "continued_decay"}
A_PER_HEAD = np.array([-0.1, 0.05])  # gerf's A, one per head
FEATURE_DIM = 6  # Hedgehog's d'
# The map's parameter whose gradient is checked (one value per head), for the maps that have one:
THETA = {
    "gerf": A_PER_HEAD,
    "rfa": np.asarray(0.5 + jax.random.uniform(jax.random.key(10), (H, D))),  # σ
    "hedgehog": np.asarray(jax.random.normal(jax.random.key(11), (H, D, FEATURE_DIM))) * 0.5,  # W
}
KEY_LOG_WEIGHT = np.asarray(jax.nn.log_sigmoid(jax.random.normal(jax.random.key(12), (B, H, 11))))  # rfa: log(1 - g)
HEDGEHOG_BIAS = np.asarray(jax.random.normal(jax.random.key(13), (H, FEATURE_DIM))) * 0.1
PHI_SQ = 2.0 * D**0.5  # oprf's phi_sq, fixed where it cannot come from the data (causal, recurrent, prefill)
ANGULAR = np.asarray(jax.random.normal(jax.random.key(9), (1, D)))  # hybrid's R: n = 1 angular feature
# DERF: sderf (an orthogonal T, one A per coordinate) in every mode; aderf (a dense T, one A) with
# fixed parameters only: its fit needs at least d kept queries and keys, more than these sequences
# hold (tests/random_features/test_dense_exponential.py checks its fit inside attention).
DERF = ("aderf", "sderf")
# The modes that carry a state across calls compile several programs per case (the slowest of the file). There the
# maps are those of distinct shapes: one part or two (trig, hybrid), per-token parameters (rfa), a fitted or fixed
# statistic (oprf, sderf), no projection (taylor), learned parameters (hedgehog). gerf, hyperbolic, relu and elu add
# no new shape there; every mode runs them in the chunked causal form with decay and in the naive forms.
STATE_MAPS = ["trig", "positive", "oprf", "hybrid", "sderf", "taylor", "rfa", "hedgehog"]
CARRIED = {"recurrent_decay", "prefill_attend", "continued_decay"}
CASES = [(mode, name) for name in MAPS for mode in MODES if mode not in CARRIED or name in STATE_MAPS] + [
    (mode, "aderf") for mode in ("causal", "recurrent_decay", "prefill_attend", "naive_causal_decay")
]


@functools.cache
def derf_calibration(name):
    """Per-head DERF parameters fitted by the reference on other data, ``{name: [H, *event]}``: for the
    modes that cannot fit them to the sequence (causal, recurrent, prefill)."""
    q, k = normal(7, (H, 40, D), 0.5) * D**-0.25, normal(8, (H, 40, D), 0.5) * D**-0.25
    anisotropy = np.array([1.5] * (D // 2) + [0.5] * (D - D // 2))  # queries and keys of different covariances
    fits = [references.DERF_FITS[name](q[h] * anisotropy, k[h]) for h in range(H)]
    return {n: np.stack([fit[n] for fit in fits]) for n in fits[0]}


KEEP_SELF = np.array([[1, 1, 0, 1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 0, 1, 1, 1]], bool)  # holes everyone sees
KEEP_CAUSAL = np.array([[0, 0, 0, 1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1, 0, 1, 1]], bool)  # left padding + a hole
KEEP_MEMORY = np.array([[1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1], [1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1]], bool)


def inputs(mode):
    """(q, k, v, key mask [B, Lk]) of the mode, small enough that trig's normalizer stays positive."""
    lq, lk = (L_QUERIES, L_MEMORY) if mode in ("cross", "prefill_attend") else (L, L)
    log_decay = -0.5 * jax.nn.softplus(normal(5, (B, lq, H)))
    keep = {"cross": KEEP_MEMORY, "prefill_attend": KEEP_MEMORY}.get(
        mode, KEEP_CAUSAL if mode in CAUSAL_MODES else KEEP_SELF
    )
    q, k, v = normal(1, (B, lq, H, D), 0.5), normal(2, (B, lk, H, D), 0.5), normal(3, (B, lk, H, D))
    return q, k, v, keep, np.asarray(log_decay, np.float64)


def rfa_params(name, mode, A, kv_len):
    if name == "gerf":
        return {"A": A[:, None]}  # [H, 1]: broadcast against [batch, heads, length]
    if name == "rfa":
        return {"sigma": A[:, None], "key_log_weight": KEY_LOG_WEIGHT[..., :kv_len]}  # [H, 1, d], [B, H, Lk]
    if name == "hedgehog":
        return {"weight": A[:, None], "bias": HEDGEHOG_BIAS[:, None]}
    if name == "oprf" and mode not in FITTED_MODES:
        return {"phi_sq": PHI_SQ}
    if name == "hybrid":
        return {"angular": ANGULAR}
    if name in DERF and mode not in FITTED_MODES:
        return {n: value[:, None] for n, value in derf_calibration(name).items()}  # [H, 1, *event]
    return None


FITTED_MODES = {"bidirectional", "cross", "naive_bidirectional"}  # where oprf and the DERFs fit to the data


def run_rfa(mode, name, q, k, v, W, A, keep, log_decay):
    """The mode's ``(output [B, Lq, H, dv], final state or None)`` computed by rfa."""
    fm = rfa.estimator(name)
    params = rfa_params(name, mode, A, k.shape[1])
    options = dict(estimator=name, projection=W if fm.needs_projection else None, feature_params=params)

    def tokens(start, size):  # the options of `size` keys from `start` on: per-token parameters ([B, H, L]) sliced
        return {
            **options,
            "feature_params": params
            and {
                n: jax.lax.dynamic_slice_in_dim(p, start, size, -1)
                if np.ndim(p) == 3 and np.shape(p)[-1] == k.shape[1]
                else p
                for n, p in params.items()
            },
        }

    mask, decay = keep[:, None, None, :], log_decay if mode in DECAY_MODES else None
    if mode.startswith("naive"):
        return naive_kernelized_attention(
            q, k, v, mask=mask, is_causal=mode in CAUSAL_MODES, log_decay=decay, **options
        ), None
    if mode in ("bidirectional", "cross"):
        return rfa.kernelized_attention(q, k, v, mask=mask, chunk_size=4, **options), None
    if mode in ("causal", "causal_decay"):
        return rfa.kernelized_attention(
            q, k, v, mask=mask, is_causal=True, log_decay=decay, chunk_size=4, return_state=True, **options
        )
    if mode == "prefill_attend":  # the state of the memory alone (no query), then read with no new key
        _, state = rfa.kernelized_attention(q[:, :0], k, v, mask=mask, return_state=True, **options)
        return rfa.kernelized_attention(q, k[:, :0], v[:, :0], initial_state=state, **tokens(0, 0)), state

    def causal(state, start, stop, chunk_size):  # tokens [start, stop) from `state`, in one call
        return rfa.kernelized_attention(
            q[:, start:stop],
            k[:, start:stop],
            v[:, start:stop],
            mask=mask[..., start:stop],
            is_causal=True,
            log_decay=decay[:, start:stop],
            chunk_size=chunk_size,
            initial_state=state,
            return_state=True,
            **tokens(start, stop - start),
        )

    if mode == "continued_decay":  # chunked, then a token in its own call, then chunked: one state throughout
        # (a token's call continuing a token's call is the recurrent mode's, for the same maps)
        first, state = causal(None, 0, 4, 3)
        step, state = causal(state, 4, 5, 64)
        last, state = causal(state, 5, L, 3)  # 4 tokens: a padded tail
        return jnp.concatenate([first, step, last], axis=1), state
    num_outputs = jax.eval_shape(lambda: causal(None, 0, 1, 1))[1].kv.shape[-2]

    def one_token(state, token):  # recurrent: a scan over tokens, one call each
        t, (q_t, k_t, v_t, keep_t, g_t) = token[0], (x[:, None] for x in token[1:])
        out, state = rfa.kernelized_attention(
            q_t,
            k_t,
            v_t,
            mask=keep_t[:, None, None],
            is_causal=True,
            log_decay=g_t,
            initial_state=state,
            return_state=True,
            **tokens(t, 1),
        )
        return state, out[:, 0]

    sequence = (jnp.arange(L), *(jnp.swapaxes(x, 0, 1) for x in (q, k, v, keep, decay)))
    state, outs = jax.lax.scan(one_token, init_state((B,), H, num_outputs, D, dtype=q.dtype), sequence)
    return jnp.swapaxes(outs, 0, 1), state


def run_reference(mode, name, q, k, v, W, A, keep, log_decay, phi_sq=None, derf=None):
    params = {"A": A} if name == "gerf" else {}
    if name == "rfa":
        params = {"sigma": A, "key_log_weight": KEY_LOG_WEIGHT[..., : k.shape[1]]}
    if name == "hedgehog":
        params = {"weight": A, "bias": HEDGEHOG_BIAS}
    if name in DERF:
        params = derf or (derf_calibration(name) if mode not in FITTED_MODES else {})
    if name == "hybrid":
        params["angular"] = ANGULAR
    if name == "oprf":
        params["phi_sq"] = PHI_SQ if mode not in FITTED_MODES else phi_sq
    if name == "oprf" and params["phi_sq"] is None:
        del params["phi_sq"]  # the reference's own statistic of the kept tokens
    W = W if rfa.estimator(name).needs_projection else None
    decay = log_decay if mode in DECAY_MODES else None
    return references.kernelized_attention(
        q, k, v, name, W, keep_k=keep, causal=mode in CAUSAL_MODES, log_decay=decay, **params
    )


@functools.cache
def compiled_value_and_grad(mode, name):
    """``((loss, (out, state)), grads of Σ out ⊙ G w.r.t. q, k, v, W, A, log_decay)``, jitted once per mode and map."""

    def loss(q, k, v, W, A, keep, log_decay, G):
        out, state = run_rfa(mode, name, q, k, v, W, A, keep, log_decay)
        return jnp.sum(out * G), (out, state)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4, 6), has_aux=True))


# The fast tier: every mode with positive features, every map in the chunked causal form with decay.
FAST = {case for case in CASES if case[1] == "positive" or case[0] == "causal_decay"}


@pytest.mark.parametrize("mode, name", tiered(CASES, FAST, ids=[f"{name}-{mode}" for mode, name in CASES]))
def test_outputs_and_gradients_equal_the_reference(mode, name):
    q, k, v, keep, log_decay = inputs(mode)
    W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D))
    G = normal(4, q.shape[:-1] + (D,))
    theta = THETA.get(name, A_PER_HEAD)
    args = (q, k, v, W, theta, keep, log_decay, G)
    (_, (out, state)), grads = compiled_value_and_grad(mode, name)(*args)
    expected = run_reference(mode, name, q, k, v, W, theta, keep, log_decay)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)

    phi_sq, derf = None, None
    scale, keep_q = D**-0.25, keep if mode != "cross" else np.ones(q.shape[:2], bool)
    if name == "oprf" and mode in FITTED_MODES:  # the statistic is held at its value
        phi_sq = references.oprf_statistic(q * scale, k * scale, keep_q, keep)
    if name in DERF and mode in FITTED_MODES:  # and so is the DERF fit, per row and head
        fits = [
            [references.DERF_FITS[name](q[b, keep_q[b], h] * scale, k[b, keep[b], h] * scale) for h in range(H)]
            for b in range(B)
        ]
        derf = {n: np.array([[fit[n] for fit in row] for row in fits]) for n in fits[0][0]}  # [B, H, *event]

    def loss(q, k, v, W, A, log_decay):
        return np.sum(run_reference(mode, name, q, k, v, W, A, keep, log_decay, phi_sq, derf) * G)

    differentiable = (
        [0, 1, 2]
        + ([3] if rfa.estimator(name).needs_projection else [])
        + ([4] if name in THETA else [])
        + ([5] if mode in DECAY_MODES else [])
    )
    reference_args = (q, k, v, W, theta, log_decay)
    rng = np.random.default_rng(5)
    for i in differentiable:
        direction = rng.standard_normal(np.shape(reference_args[i]))
        expected_derivative = references.directional_derivative(loss, reference_args, i, direction)
        derivative = float(np.sum(np.asarray(grads[i], np.float64) * direction))
        scale = np.linalg.norm(grads[i]) * np.linalg.norm(direction)
        assert abs(derivative - expected_derivative) <= 2e-4 * scale + 1e-6, (i, derivative, expected_derivative)

    if mode in STATE_MODES:  # the state and the gradients equal the naive form's
        naive_mode = "naive_causal_decay" if mode in DECAY_MODES else "naive_bidirectional"
        if mode == "causal":
            naive_mode = "naive_causal"
        (_, (_, naive_state)), naive_grads = compiled_naive_value_and_grad(naive_mode, name, mode)(*args)
        value, naive_value = state.value(), naive_state.value()
        np.testing.assert_allclose(value, naive_value, rtol=2e-4, atol=2e-5 * float(np.max(np.abs(naive_value))))
        for i, (grad, naive_grad) in enumerate(zip(grads, naive_grads, strict=True)):
            atol = 2e-4 * float(np.max(np.abs(naive_grad))) + 1e-7
            np.testing.assert_allclose(grad, naive_grad, rtol=2e-3, atol=atol, err_msg=f"gradient {i}")


# float64 inputs are computed in float64 (rfa._dtypes.computation_dtype): a mode and a map per shape of the state.
FLOAT64_CASES = [
    (mode, name) for mode in ("bidirectional", "causal_decay", "recurrent_decay") for name in ("positive", "trig")
]


@pytest.mark.parametrize("mode, name", tiered(FLOAT64_CASES, {("causal_decay", "positive")}))
def test_float64_inputs_are_computed_in_float64(mode, name):
    """Under x64, float64 inputs give a float64 output equal to the float64 reference to 1e-12 (float32 anywhere on
    the way would leave ~1e-7), and gradients equal to its central differences to 1e-8 of their scale."""
    with jax.enable_x64(True):
        q, k, v, keep, log_decay = (np.asarray(x, np.float64) if x.dtype != bool else x for x in inputs(mode))
        W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D), np.float64)
        G, theta = np.asarray(normal(4, q.shape[:-1] + (D,)), np.float64), A_PER_HEAD
        (_, (out, _)), grads = compiled_value_and_grad(mode, name)(q, k, v, W, theta, keep, log_decay, G)
        assert out.dtype == jnp.float64 and all(g.dtype == jnp.float64 for g in grads)
        expected = run_reference(mode, name, q, k, v, W, theta, keep, log_decay)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)

        def loss(q, k, v, W, log_decay):
            return np.sum(run_reference(mode, name, q, k, v, W, theta, keep, log_decay) * G)

        reference_args, rng = (q, k, v, W, log_decay), np.random.default_rng(6)
        grads = (*grads[:4], grads[5])  # those of q, k, v, W, log_decay (positive and trig have no parameter)
        for i, grad in enumerate(grads[: 4 + (mode in DECAY_MODES)]):
            direction = rng.standard_normal(np.shape(reference_args[i]))
            expected_derivative = references.directional_derivative(loss, reference_args, i, direction)
            scale = np.linalg.norm(grad) * np.linalg.norm(direction)
            assert abs(float(np.sum(grad * direction)) - expected_derivative) <= 1e-8 * scale, i


@functools.cache
def compiled_naive_value_and_grad(naive_mode, name, mode):
    """The naive form's ``((loss, (out, state)), grads)`` for the inputs of ``mode`` (its parameters too)."""

    def loss(q, k, v, W, A, keep, log_decay, G):
        fm = rfa.estimator(name)
        options = dict(
            estimator=name,
            projection=W if fm.needs_projection else None,
            feature_params=rfa_params(name, mode, A, k.shape[1]),
        )
        out, state = naive_kernelized_attention(
            q,
            k,
            v,
            mask=keep[:, None, None, :],
            is_causal=naive_mode != "naive_bidirectional",
            log_decay=log_decay if naive_mode == "naive_causal_decay" else None,
            return_state=True,
            **options,
        )
        return jnp.sum(out * G), (out, state)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4, 6), has_aux=True))
