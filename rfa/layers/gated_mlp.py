"""The gated position-wise MLP of Llama-style decoders: ``W_down (act(W_gate x) ⊙ W_up x)`` (SwiGLU with SiLU; Shazeer,
"GLU Variants Improve Transformer", 2020), no biases, as Qwen3's, Qwen3.5's and Kimi Linear's dense MLPs and their
experts."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError

Array = jax.Array
ACTIVATIONS = {
    "silu": jax.nn.silu,
    "gelu": functools.partial(jax.nn.gelu, approximate=False),
    "gelu_pytorch_tanh": functools.partial(jax.nn.gelu, approximate=True),
    "relu": jax.nn.relu,
}
"""Hugging Face's ``hidden_act`` names and their functions."""


class GatedMLP(nnx.Module):
    """``[..., d_model] -> [..., d_model]`` through ``hidden`` gated units.

    Args:
      d_model, hidden: the widths.
      activation: a key of :data:`ACTIVATIONS` (Hugging Face's ``hidden_act``).
      dtype, param_dtype: the computation's and the weights' dtypes.

    Example:
      >>> mlp = GatedMLP(8, 16, rngs=nnx.Rngs(0))
      >>> mlp(jnp.ones((2, 3, 8))).shape
      (2, 3, 8)
    """

    def __init__(
        self,
        d_model: int,
        hidden: int,
        *,
        activation: str = "silu",
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if activation not in ACTIVATIONS:
            raise InputError(f"GatedMLP's activation must be one of {list(ACTIVATIONS)}, got {activation!r}.")
        self.activation = ACTIVATIONS[activation]
        linear = {"use_bias": False, "dtype": dtype, "param_dtype": param_dtype, "rngs": rngs}
        self.gate = nnx.Linear(d_model, hidden, **linear)
        self.up = nnx.Linear(d_model, hidden, **linear)
        self.down = nnx.Linear(hidden, d_model, **linear)

    def __call__(self, x: Array) -> Array:
        return self.down(self.activation(self.gate(x)) * self.up(x))
