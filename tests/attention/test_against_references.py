"""Every kernelized mode and map held to the independent float64 reference: outputs and gradients.

Modes: bidirectional self-attention (padding in the middle), cross-attention (padding in the middle
of the memory), chunked causal (left padding and a hole, several chunks and a padded tail),
recurrent ``step`` over the tokens, and ``prefill`` + ``attend``. Gradients of ``Σ out ⊙ G`` w.r.t. q,
k, v, the projection W and gerf's A are compared as directional derivatives with central differences
of the reference, in which OPRF's data statistic is held fixed (it is a statistic: no gradient).
Everything runs under ``jit``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from helpers import normal

import rfa
from rfa.attention import attend, init_state, prefill, step

B, H, D, M = 2, 2, 8, 16
L, L_MEMORY, L_QUERIES = 9, 11, 5
MAPS = ["trig", "positive", "hyperbolic", "gerf", "oprf", "relu", "elu", "hybrid", "sderf"]
MODES = ["bidirectional", "cross", "causal", "recurrent", "prefill_attend"]
CAUSAL_MODES = {"causal", "recurrent"}
A_PER_HEAD = np.array([-0.1, 0.05])  # gerf's A, one per head
PHI_SQ = 2.0 * D**0.5  # oprf's phi_sq, fixed where it cannot come from the data (causal, recurrent, prefill)
ANGULAR = np.asarray(jax.random.normal(jax.random.key(9), (1, D)))  # hybrid's R: n = 1 angular feature
# DERF: sderf (an orthogonal T, one A per coordinate) in every mode; aderf (a dense T, one A) with
# fixed parameters only: its fit needs at least d kept queries and keys, more than these sequences
# hold (tests/random_features/test_dense_exponential.py checks its fit inside attention).
DERF = ("aderf", "sderf")
CASES = [(mode, name) for name in MAPS for mode in MODES] + [
    (mode, "aderf") for mode in ("causal", "recurrent", "prefill_attend")
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
    keep = {"cross": KEEP_MEMORY, "prefill_attend": KEEP_MEMORY}.get(
        mode, KEEP_CAUSAL if mode in CAUSAL_MODES else KEEP_SELF
    )
    q, k, v = normal(1, (B, lq, H, D), 0.5), normal(2, (B, lk, H, D), 0.5), normal(3, (B, lk, H, D))
    return q, k, v, keep


def rfa_params(name, mode, A):
    if name == "gerf":
        return {"A": A[:, None]}  # [H, 1]: broadcast against [batch, heads, length]
    if name == "oprf" and mode not in ("bidirectional", "cross"):
        return {"phi_sq": PHI_SQ}
    if name == "hybrid":
        return {"angular": ANGULAR}
    if name in DERF and mode not in ("bidirectional", "cross"):
        return {n: value[:, None] for n, value in derf_calibration(name).items()}  # [H, 1, *event]
    return None


def run_rfa(mode, name, q, k, v, W, A, keep):
    """The mode's output ``[B, Lq, H, dv]`` computed by rfa."""
    fm = rfa.feature_map(name)
    options = dict(
        feature_map=name, projection=W if fm.needs_projection else None, feature_params=rfa_params(name, mode, A)
    )
    if mode in ("bidirectional", "cross", "causal"):
        return rfa.kernelized_attention(
            q, k, v, mask=keep[:, None, None, :], is_causal=mode == "causal", chunk_size=4, **options
        )
    if mode == "recurrent":
        state = init_state((B,), H, fm.num_outputs(M, D), D)

        def one_token(state, token):
            q_t, k_t, v_t, keep_t = token
            return step(state, q_t, k_t, v_t, mask=keep_t[:, None], **options)

        tokens = (*(jnp.swapaxes(x, 0, 1) for x in (q, k, v)), jnp.swapaxes(keep, 0, 1))
        return jnp.swapaxes(jax.lax.scan(one_token, state, tokens)[1], 0, 1)
    state = prefill(k, v, mask=keep[..., None], **options)
    return jax.vmap(lambda q_t: attend(state, q_t, **options), in_axes=1, out_axes=1)(q)


def run_reference(mode, name, q, k, v, W, A, keep, phi_sq=None, derf=None):
    params = {"A": A} if name == "gerf" else {}
    if name in DERF:
        params = derf or (derf_calibration(name) if mode not in ("bidirectional", "cross") else {})
    if name == "hybrid":
        params["angular"] = ANGULAR
    if name == "oprf":
        params["phi_sq"] = PHI_SQ if mode not in ("bidirectional", "cross") else phi_sq
    if name == "oprf" and params["phi_sq"] is None:
        del params["phi_sq"]  # the reference's own statistic of the kept tokens
    W = W if name != "elu" else None
    return references.kernelized_attention(q, k, v, name, W, keep_k=keep, causal=mode in CAUSAL_MODES, **params)


@functools.cache
def compiled_value_and_grad(mode, name):
    """``(out, grads of Σ out ⊙ G w.r.t. q, k, v, W, A)`` of rfa, jitted once per mode and map."""

    def loss(q, k, v, W, A, keep, G):
        out = run_rfa(mode, name, q, k, v, W, A, keep)
        return jnp.sum(out * G), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4), has_aux=True))


@pytest.mark.parametrize("mode, name", CASES, ids=[f"{name}-{mode}" for mode, name in CASES])
def test_outputs_and_gradients_equal_the_reference(mode, name):
    q, k, v, keep = inputs(mode)
    W = np.asarray(rfa.sample_projection(jax.random.key(0), M, D))
    G = normal(4, q.shape[:-1] + (D,))
    (_, out), grads = compiled_value_and_grad(mode, name)(q, k, v, W, A_PER_HEAD, keep, G)
    expected = run_reference(mode, name, q, k, v, W, A_PER_HEAD, keep)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)

    phi_sq, derf = None, None
    scale, keep_q = D**-0.25, keep if mode == "bidirectional" else np.ones(q.shape[:2], bool)
    if name == "oprf" and mode in ("bidirectional", "cross"):  # the statistic is held at its value
        phi_sq = references.oprf_statistic(q * scale, k * scale, keep_q, keep)
    if name in DERF and mode in ("bidirectional", "cross"):  # and so is the DERF fit, per row and head
        fits = [[references.DERF_FITS[name](q[b, keep_q[b], h] * scale, k[b, keep[b], h] * scale)
                 for h in range(H)] for b in range(B)]  # fmt: skip
        derf = {n: np.array([[fit[n] for fit in row] for row in fits]) for n in fits[0][0]}  # [B, H, *event]

    def loss(q, k, v, W, A):
        return np.sum(run_reference(mode, name, q, k, v, W, A, keep, phi_sq, derf) * G)

    args = (q, k, v, W, A_PER_HEAD)
    differentiable = (
        [0, 1, 2] + ([3] if rfa.feature_map(name).needs_projection else []) + ([4] if name == "gerf" else [])
    )
    rng = np.random.default_rng(5)
    for i in differentiable:
        direction = rng.standard_normal(np.shape(args[i]))
        expected_derivative = references.directional_derivative(loss, args, i, direction)
        derivative = float(np.sum(np.asarray(grads[i], np.float64) * direction))
        scale = np.linalg.norm(grads[i]) * np.linalg.norm(direction)
        assert abs(derivative - expected_derivative) <= 2e-4 * scale + 1e-6, (i, derivative, expected_derivative)
