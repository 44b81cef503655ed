"""The mixture of experts against a per-token NumPy float64 loop over its top-k experts (transformers' Qwen3-Next
block through a whole model: tests/models/test_pretrained.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import normal

import rfa
from rfa.layers.moe import ExpertsOptions, MixtureOfExperts


def _silu(x):
    return x / (1 + np.exp(-x))


def _reference(moe: MixtureOfExperts, x: np.ndarray) -> np.ndarray:
    o = moe.options
    weights = {n: np.float64(getattr(moe, n)[...]) for n in ("router", "gate", "up", "down")}
    out = np.zeros_like(x, np.float64)
    for t, token in enumerate(np.float64(x)):
        logits = token @ weights["router"]
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        top = np.argsort(-probs)[: o.top_k]
        chosen = probs[top] / (probs[top].sum() if o.norm_topk_prob else 1.0)
        for e, w in zip(top, chosen, strict=True):
            hidden = _silu(token @ weights["gate"][e]) * (token @ weights["up"][e])
            out[t] += w * (hidden @ weights["down"][e])
        if moe.shared is not None:
            s = moe.shared
            shared = (
                _silu(token @ np.float64(s.gate.kernel[...])) * (token @ np.float64(s.up.kernel[...]))
            ) @ np.float64(s.down.kernel[...])
            gate = 1 / (1 + np.exp(-(token @ np.float64(moe.shared_gate.kernel[...])))) if moe.shared_gate else 1.0
            out[t] += gate * shared
    return out


@pytest.mark.parametrize(
    "options",
    [
        ExpertsOptions(num_experts=6, top_k=2, expert_dim=12, shared_dim=10, shared_gate=True),
        ExpertsOptions(num_experts=4, top_k=3, expert_dim=8, norm_topk_prob=False),
    ],
    ids=["renormalized-shared-gated", "raw-probabilities"],
)
def test_the_mixture_is_each_token_s_top_k_experts_weighted_plus_the_shared_one(options):
    moe = MixtureOfExperts(16, options, rngs=nnx.Rngs(0))
    x = normal(0, (2, 5, 16))
    out = jax.jit(lambda x: moe(x))(jnp.asarray(x))
    np.testing.assert_allclose(out.reshape(-1, 16), _reference(moe, x.reshape(-1, 16)), rtol=2e-5, atol=2e-6)
    grads = jax.grad(lambda x: jnp.sum(moe(x) ** 2))(jnp.asarray(x))
    assert bool(jnp.all(jnp.isfinite(grads))) and float(jnp.abs(grads).max()) > 0


def test_bad_expert_options_are_refused():
    with pytest.raises(rfa.InputError, match="top_k = 5 exceeds num_experts = 4"):
        ExpertsOptions(num_experts=4, top_k=5, expert_dim=8)
    with pytest.raises(rfa.InputError, match="shared_gate gates the shared expert"):
        ExpertsOptions(num_experts=4, top_k=2, expert_dim=8, shared_gate=True)
