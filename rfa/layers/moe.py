"""A mixture of SwiGLU experts with top-k routing (Shazeer et al., "Outrageously Large Neural Networks", ICLR 2017), and
shared experts that every token passes through (Dai et al., "DeepSeekMoE", 2024), as Qwen3-Next's sparse blocks.

The router's logits ``x W_r`` (in float32) give each expert a score: ``softmax`` over the experts (Qwen3-Next), or
``sigmoid`` each (DeepSeek-V3, Kimi Linear: DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, whose correction bias
``b``, learned by a rule apart from the gradient, changes which experts a token takes but not their weights: the
top ``top_k`` of ``score + b``, within the ``top_groups`` best of ``num_groups`` groups of experts, each group ranked
by its two best). The chosen scores are renormalized to sum to 1 where ``norm_topk_prob``, times
``routed_scaling_factor``; the output is the sum of those experts' outputs so weighted, plus the shared expert's,
times ``sigmoid(w_g · x)`` where it has a gate. Every expert runs on every token and the router's weights, 0 off the
top k, select: exact, and its cost grows with the experts.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.layers.gated_mlp import ACTIVATIONS, GatedMLP
from rfa.layers.kinds import check_bool, check_int

Array = jax.Array
SCORINGS = ("softmax", "sigmoid")


class CorrectionBias(nnx.Variable):
    """A sigmoid router's per-expert bias on the scores that choose the experts (DeepSeek-V3's
    ``e_score_correction_bias``): not a parameter, since no gradient reaches it (the choice is discrete) and DeepSeek
    updates it by its own rule, from the experts' loads."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpertsOptions:
    """A sparse block's experts.

    Attributes:
      num_experts: the routed experts; ``top_k``: how many each token takes.
      expert_dim: a routed expert's hidden width.
      norm_topk_prob: the top k probabilities renormalized to sum to 1.
      shared_dim: the shared expert's hidden width (None: no shared expert).
      shared_gate: the shared expert's output times ``sigmoid(w_g · x)``.
      scoring: ``"softmax"`` or ``"sigmoid"`` (with the correction bias, :class:`CorrectionBias`).
      routed_scaling_factor: the chosen experts' weights' factor.
      num_groups: the groups of experts; ``top_groups``: how many a token chooses from (sigmoid scoring).

    Example:
      >>> ExpertsOptions(num_experts=8, top_k=2, expert_dim=16).top_k
      2
    """

    num_experts: int
    top_k: int
    expert_dim: int
    norm_topk_prob: bool = True
    shared_dim: int | None = None
    shared_gate: bool = False
    scoring: str = "softmax"
    routed_scaling_factor: float = 1.0
    num_groups: int = 1
    top_groups: int = 1

    def __post_init__(self):
        for name in ("num_experts", "top_k", "expert_dim", "num_groups", "top_groups"):
            check_int(self, name)
        if self.scoring not in SCORINGS:
            raise InputError(f"scoring must be one of {list(SCORINGS)}, got {self.scoring!r}.")
        if self.num_experts % self.num_groups or self.top_groups > self.num_groups:
            raise InputError(
                f"num_groups = {self.num_groups} must divide num_experts = {self.num_experts}, and top_groups = "
                f"{self.top_groups} be at most num_groups."
            )
        if self.num_groups > 1 and self.scoring != "sigmoid":
            raise InputError("groups of experts rank by sigmoid scores with their correction bias: scoring='sigmoid'.")
        check_int(self, "shared_dim", optional=True)
        check_bool(self, "norm_topk_prob", "shared_gate")
        if self.top_k > self.num_experts:
            raise InputError(f"top_k = {self.top_k} exceeds num_experts = {self.num_experts}.")
        if self.shared_gate and self.shared_dim is None:
            raise InputError("shared_gate gates the shared expert: set shared_dim.")


class MixtureOfExperts(nnx.Module):
    """``[..., d_model] -> [..., d_model]``.

    Example:
      >>> moe = MixtureOfExperts(8, ExpertsOptions(num_experts=4, top_k=2, expert_dim=16), rngs=nnx.Rngs(0))
      >>> moe(jnp.ones((2, 3, 8))).shape
      (2, 3, 8)
    """

    def __init__(
        self,
        d_model: int,
        options: ExpertsOptions,
        *,
        activation: str = "silu",
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if activation not in ACTIVATIONS:
            raise InputError(f"MixtureOfExperts' activation must be one of {list(ACTIVATIONS)}, got {activation!r}.")
        self.options, self.activation, self.dtype = options, ACTIVATIONS[activation], jnp.dtype(dtype)
        e, inner = options.num_experts, options.expert_dim
        init = nnx.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=-2, out_axis=-1, batch_axis=0
        )
        self.router = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (d_model, e), param_dtype))
        self.gate = nnx.Param(init(rngs.params(), (e, d_model, inner), param_dtype))
        self.up = nnx.Param(init(rngs.params(), (e, d_model, inner), param_dtype))
        self.down = nnx.Param(init(rngs.params(), (e, inner, d_model), param_dtype))
        shared = options.shared_dim
        linear = {"dtype": dtype, "param_dtype": param_dtype, "rngs": rngs}
        self.shared = None if shared is None else GatedMLP(d_model, shared, activation=activation, **linear)
        self.shared_gate = nnx.Linear(d_model, 1, use_bias=False, **linear) if options.shared_gate else None
        self.bias = CorrectionBias(jnp.zeros((e,), jnp.float32)) if options.scoring == "sigmoid" else None

    def routing(self, x: Array) -> Array:
        """Each token's weight of each expert ``[..., num_experts]`` (float32): its chosen experts', 0 elsewhere."""
        o = self.options
        logits = jnp.einsum("...d,de->...e", x.astype(jnp.float32), self.router[...].astype(jnp.float32))
        if o.scoring == "softmax":
            scores = choice = jax.nn.softmax(logits, axis=-1)
        else:
            scores = jax.nn.sigmoid(logits)
            choice = scores + self.bias[...]
            groups = choice.reshape(*choice.shape[:-1], o.num_groups, -1)
            rank = jnp.sum(jax.lax.top_k(groups, min(2, groups.shape[-1]))[0], axis=-1)  # a group's two best
            kept = jnp.sum(jax.nn.one_hot(jax.lax.top_k(rank, o.top_groups)[1], o.num_groups), axis=-2) > 0
            choice = jnp.where(jnp.repeat(kept, o.num_experts // o.num_groups, axis=-1), choice, -jnp.inf)
        index = jax.lax.top_k(choice, o.top_k)[1]
        top = jnp.take_along_axis(scores, index, axis=-1)
        if o.norm_topk_prob:
            top = top / (jnp.sum(top, axis=-1, keepdims=True) + (1e-20 if o.scoring == "sigmoid" else 0.0))
        chosen = jax.nn.one_hot(index, o.num_experts, dtype=top.dtype)  # [..., k, experts]
        return o.routed_scaling_factor * jnp.einsum("...k,...ke->...e", top, chosen)

    def __call__(self, x: Array) -> Array:
        h = x.astype(self.dtype)
        gate, up, down = (w[...].astype(self.dtype) for w in (self.gate, self.up, self.down))
        hidden = self.activation(jnp.einsum("...d,edi->...ei", h, gate)) * jnp.einsum("...d,edi->...ei", h, up)
        experts = jnp.einsum("...ei,eid->...ed", hidden, down)
        out = jnp.einsum("...e,...ed->...d", self.routing(x).astype(self.dtype), experts)
        if self.shared is not None:
            shared = self.shared(h)
            out = out + (shared if self.shared_gate is None else jax.nn.sigmoid(self.shared_gate(h)) * shared)
        return out.astype(x.dtype)
