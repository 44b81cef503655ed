"""Masks as Flax builds them, in rfa.kernelized_attention: held to an explicit masked L×L reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import normal

import rfa
from rfa.attention.masks import CAUSAL, PADDING, UNSUPPORTED, plan_mask

B, L, H, D, M = 2, 12, 2, 8, 32
Q, K, V = normal(0, (B, L, H, D), 0.7), normal(1, (B, L, H, D), 0.7), normal(2, (B, L, H, D))
W = rfa.sample_projection(jax.random.key(0), M, D)
RIGHT = np.arange(L)[None, :] < np.array([L, 7])[:, None]  # [B, L]: batch row 1 padded on the right
LEFT = RIGHT[:, ::-1]  # padded on the left: visible to the causal queries that follow
CAUSAL_MASK = np.tril(np.ones((L, L), bool))

# Masks as Flax writes them: float32 0/1 arrays of shape [B, 1, q_len, kv_len] (or [B, 1, 1, kv_len]).
MASKS = {
    "key-padding": RIGHT[:, None, None, :].astype(np.float32),
    "outer-product": nnx.make_attention_mask(RIGHT, RIGHT),
    "query-only": nnx.make_attention_mask(RIGHT, np.ones((B, L), bool)),
    "causal": nnx.make_causal_mask(jnp.ones((B, L))),
    "causal-and-left-padding": nnx.combine_masks(
        nnx.make_causal_mask(jnp.ones((B, L))), nnx.make_attention_mask(LEFT, LEFT)
    ),
    "causal-and-right-key-padding": nnx.combine_masks(
        nnx.make_causal_mask(jnp.ones((B, L))), nnx.make_attention_mask(np.ones((B, L), bool), RIGHT)
    ),
}
EXPECTED_PATTERN = {
    "key-padding": PADDING,
    "outer-product": PADDING,
    "query-only": PADDING,
    "causal": CAUSAL,
    "causal-and-left-padding": CAUSAL,
    "causal-and-right-key-padding": CAUSAL,
}


def positive_features(x, w):
    """Performer's positive map exp(Wx - |x|²/2)/√m of temperature-scaled x, in float64 (written out, not rfa's)."""
    x = np.asarray(x, np.float64) * D**-0.25
    return np.exp(x @ np.asarray(w, np.float64).T - 0.5 * np.sum(x * x, -1, keepdims=True)) / np.sqrt(w.shape[0])


def masked_reference(q, k, v, mask):
    """``D⁻¹ (φ(Q)φ(K)ᵀ ⊙ mask) V`` with the L×L matrix formed; a row with no kept key outputs 0."""
    a = np.einsum("bqhf,bkhf->bhqk", positive_features(q, W), positive_features(k, W))
    a = a * (np.broadcast_to(np.asarray(mask), a.shape) != 0)
    num = np.einsum("bhqk,bkhd->bqhd", a, np.asarray(v, np.float64))
    den = a.sum(-1).transpose(0, 2, 1)[..., None]
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def attend(q, k, v, mask, **kwargs):
    return rfa.kernelized_attention(q, k, v, estimator="positive", projection=W, mask=mask, **kwargs)


@pytest.mark.parametrize("name", MASKS)
def test_flax_masks_are_told_apart(name):
    plan = plan_mask(MASKS[name], Q, K, is_causal=False)
    assert plan.pattern == EXPECTED_PATTERN[name]
    traced = jax.jit(lambda mask: plan_mask(mask, Q, K, is_causal=False).pattern)(MASKS[name])
    assert int(traced) == EXPECTED_PATTERN[name]


@pytest.mark.slow
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", MASKS)
def test_flax_masks_equal_the_masked_quadratic_form(name, jitted):
    """Every pattern Flax builds, with concrete values (eager) and traced ones (jit, lax.switch)."""
    call = jax.jit(attend) if jitted else attend
    out = call(Q, K, V, MASKS[name])
    np.testing.assert_allclose(out, masked_reference(Q, K, V, MASKS[name]), rtol=2e-4, atol=2e-5)


@pytest.mark.slow
def test_traced_causal_mask_gradients_equal_the_reference():
    """Gradients w.r.t. q, k and v through the lax.switch branch a traced causal ∧ padding mask selects."""
    mask = MASKS["causal-and-left-padding"]
    g = normal(5, (B, L, H, D))

    def reference(q, k, v):
        def phi(x):
            x = x * D**-0.25
            return jnp.exp(x @ W.T - 0.5 * jnp.sum(x * x, -1, keepdims=True)) / np.sqrt(M)

        a = jnp.einsum("bqhf,bkhf->bhqk", phi(q), phi(k)) * mask
        den = a.sum(-1).transpose(0, 2, 1)[..., None]
        out = jnp.einsum("bhqk,bkhd->bqhd", a, v) / jnp.where(den > 0, den, 1.0)
        return jnp.sum(out * g)

    grads = jax.jit(jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v, mask) * g), argnums=(0, 1, 2)))(Q, K, V)
    expected = jax.grad(reference, argnums=(0, 1, 2))(Q, K, V)
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["outer-product", "causal-and-left-padding"])
def test_padded_queries_change_nothing_and_output_zero(name):
    """Padded queries (and keys) holding NaN: other outputs and every gradient stay finite and equal."""
    valid = RIGHT if name == "outer-product" else LEFT
    poisoned = [np.where(valid[:, :, None, None], x, np.nan).astype(np.float32) for x in (Q, K, V)]
    clean, dirty = jax.jit(attend)(Q, K, V, MASKS[name]), jax.jit(attend)(*poisoned, MASKS[name])
    np.testing.assert_allclose(dirty[valid], clean[valid], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(dirty[~valid], 0.0)
    gradient = jax.jit(jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v, MASKS[name])), argnums=(0, 1, 2)))
    for got, want in zip(gradient(*poisoned), gradient(Q, K, V), strict=True):
        np.testing.assert_allclose(got[valid], want[valid], rtol=1e-5, atol=1e-6)  # NaN reaches no gradient
        np.testing.assert_array_equal(got[~valid], 0.0)  # and padding gets none


@pytest.mark.slow
def test_padded_batch_equals_truncated_sequences_under_causal_and_left_padding():
    out = jax.jit(attend)(Q, K, V, MASKS["causal-and-left-padding"])
    alone = attend(Q[1:, L - 7 :], K[1:, L - 7 :], V[1:, L - 7 :], None, is_causal=True)
    np.testing.assert_allclose(out[1:, L - 7 :], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_vmapped_masks_of_different_patterns():
    """Under vmap each mask gets its own form (lax.switch becomes a select over the branches)."""
    masks = jnp.stack([MASKS["causal"][0], MASKS["outer-product"][1]])  # [2, 1, L, L]: causal, then padding
    out = jax.vmap(lambda q, k, v, m: attend(q, k, v, m))(Q, K, V, masks)
    for b in range(B):
        expected = masked_reference(Q[b : b + 1], K[b : b + 1], V[b : b + 1], masks[b][None])
        np.testing.assert_allclose(out[b : b + 1], expected, rtol=2e-4, atol=2e-5)


SLIDING_WINDOW = CAUSAL_MASK & ~np.tril(np.ones((L, L), bool), -3)


def test_unsupported_traced_mask_raises_when_the_compiled_call_runs():
    """The compiled call raises the eager error, found on the device (rfa.checks.checked re-raises it as itself;
    without it JAX reports a JaxRuntimeError carrying the text), under grad and vmap too."""
    with pytest.raises(rfa.InputError) as eager:
        attend(Q, K, V, SLIDING_WINDOW)
    with pytest.raises(rfa.InputError) as jitted:
        rfa.checks.checked(jax.jit(attend))(Q, K, V, SLIDING_WINDOW)
    assert str(jitted.value) == str(eager.value) and "lower-triangular but not causal" in str(eager.value)
    with pytest.raises(jax.errors.JaxRuntimeError, match="lower-triangular but not causal"):
        jax.block_until_ready(jax.jit(jax.grad(lambda q: jnp.sum(attend(q, K, V, SLIDING_WINDOW))))(Q))
    masks = jnp.stack([MASKS["causal"][0], SLIDING_WINDOW[None]])
    with pytest.raises(rfa.InputError, match="lower-triangular but not causal"):
        rfa.checks.checked(jax.jit(jax.vmap(attend)))(Q, K, V, masks)
    anti_causal = jnp.asarray(SLIDING_WINDOW.T)
    with pytest.raises(rfa.InputError) as eager:
        attend(Q, K, V, anti_causal)
    with pytest.raises(rfa.InputError) as jitted:
        rfa.checks.checked(jax.jit(attend))(Q, K, V, anti_causal)
    assert str(jitted.value) == str(eager.value) and "upper-triangular" in str(eager.value)
    out = jax.jit(attend)(Q, K, V, MASKS["causal"])  # a supported mask runs
    assert bool(jnp.all(jnp.isfinite(out)))


def test_additive_masks_are_refused_with_the_conversion():
    additive = jnp.where(CAUSAL_MASK, 0.0, -jnp.inf)
    with pytest.raises(ValueError, match="Convert it with `mask = additive_mask == 0`"):
        attend(Q, K, V, additive)
    with pytest.raises(jax.errors.JaxRuntimeError, match="looks like an additive mask"):
        jax.block_until_ready(jax.jit(attend)(Q, K, V, additive))
    with pytest.raises(ValueError, match="looks like an additive mask"):
        rfa.softmax_attention(Q, K, V, mask=additive)
    converted = jax.jit(attend)(Q, K, V, additive == 0)
    np.testing.assert_allclose(converted, attend(Q, K, V, CAUSAL_MASK), rtol=1e-5, atol=1e-6)  # jit vs eager, f32
    no_masking = jnp.zeros(CAUSAL_MASK.shape, jnp.float32)  # PyTorch's additive "no masking"
    with pytest.raises(ValueError, match="an all-zero mask attends nothing"):
        attend(Q, K, V, no_masking)
    with pytest.raises(jax.errors.JaxRuntimeError, match="an all-zero mask attends nothing"):
        jax.block_until_ready(jax.jit(attend)(Q, K, V, no_masking))
    assert not jnp.any(attend(Q, K, V, no_masking.astype(jnp.bool_)))  # all False, as written: outputs 0


def test_unsupported_concrete_mask_raises():
    with pytest.raises(ValueError, match="lower-triangular but not causal"):
        attend(Q, K, V, SLIDING_WINDOW)


@pytest.mark.slow
def test_traced_causal_mask_with_a_data_fitted_map():
    """OPRF fits phi_sq from the data: fine for a padding mask, refused for a causal one (at run time under jit)."""

    def oprf(mask):
        return rfa.kernelized_attention(Q, K, V, estimator="oprf", projection=W, mask=mask)

    padded = jax.jit(oprf)(MASKS["outer-product"])
    np.testing.assert_allclose(padded, oprf(MASKS["outer-product"]), rtol=1e-5, atol=1e-6)
    with pytest.raises(rfa.InputError, match=r"feature_params\['phi_sq'\]") as eager:
        oprf(MASKS["causal"])
    with pytest.raises(rfa.InputError) as jitted:
        rfa.checks.checked(jax.jit(oprf))(MASKS["causal"])
    assert str(jitted.value) == str(eager.value)


@pytest.mark.slow
def test_outer_product_padding_gives_oprf_the_statistic_of_the_valid_tokens():
    """Padded queries are left out of OPRF's phi_sq: row 1 equals its truncated sequence."""

    def oprf(q, k, v, mask=None):
        return rfa.kernelized_attention(q, k, v, estimator="oprf", projection=W, mask=mask)

    padded = oprf(Q, K, V, MASKS["outer-product"])
    np.testing.assert_allclose(padded[1:, :7], oprf(Q[1:, :7], K[1:, :7], V[1:, :7]), rtol=1e-5, atol=1e-6)


def test_is_causal_combines_with_a_dense_padding_mask():
    out = attend(Q, K, V, MASKS["outer-product"], is_causal=True)
    expected = masked_reference(Q, K, V, np.asarray(MASKS["outer-product"]) * CAUSAL_MASK)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)


def test_cross_attention_mask_cannot_be_causal():
    q = Q[:, :5]
    mask = np.tril(np.ones((5, L), bool))
    with pytest.raises(ValueError, match="cannot apply this mask"):
        attend(q, K, V, mask)
    assert int(jax.jit(lambda m: plan_mask(m, q, K, is_causal=False).pattern)(mask)) == UNSUPPORTED


def test_is_causal_with_a_traced_mask_that_keeps_only_the_first_key():
    """mask ∧ tril is then padding and causal ∧ padding at once: the causal form runs, not the refusal."""
    mask = np.zeros((L, L), bool)
    mask[:, 0] = True
    out = jax.jit(lambda m: attend(Q, K, V, m, is_causal=True))(mask)
    np.testing.assert_allclose(out, masked_reference(Q, K, V, mask), rtol=2e-4, atol=2e-5)
