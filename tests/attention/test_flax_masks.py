"""Every Flax layer of rfa fed every mask Flax makes: each mask is applied exactly or refused, never answered
silently. Applied exactly is measured by what each output depends on: output i depends on input j (its Jacobian
block is nonzero) exactly where the mask lets query i see key j, besides query i's own input wherever it sees some
key. A causal layer adds causality; a padded token (one no query sees as a key) outputs 0 there, as fla's layers
leave out the padding of their ``attention_mask``; the sliding window counts the kept tokens. A key-padding mask on a
causal state layer once left a padded token's output to the packed core, which read the tokens after it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered

import rfa

B, L, D, WINDOW = 2, 8, 16, 3
X = jax.random.normal(jax.random.key(1), (B, L, D))
VALID = jnp.array([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 1, 1]], bool)  # left padding, and a hole
ONES, POSITIONS = jnp.ones((B, L), bool), jnp.broadcast_to(jnp.arange(L), (B, L))
SEGMENTS = jnp.array([[0, 0, 0, 1, 1, 1, 1, 2], [0, 0, 1, 1, 1, 1, 1, 1]])
CAUSAL, PADDING = nnx.make_causal_mask(ONES), nnx.make_attention_mask(VALID, VALID)
APPLIED = {  # the masks every layer applies (float32 as Flax makes them, or bool)
    "padding": PADDING,
    "key padding": nnx.make_attention_mask(ONES, VALID),
    "query padding": nnx.make_attention_mask(VALID, ONES),
    "key mask [B, 1, 1, L]": VALID[:, None, None, :],
    "causal": CAUSAL,
    "causal and padding": nnx.combine_masks(CAUSAL, PADDING),
}
REFUSED = {  # what the refusal says it found
    "packed sequences": (
        nnx.combine_masks(CAUSAL, nnx.make_attention_mask(SEGMENTS, SEGMENTS, jnp.equal)),
        "lower-triangular but not causal",
    ),
    "prefix-LM": (jnp.logical_or(CAUSAL, nnx.make_attention_mask(POSITIONS < 3, POSITIONS < 3)), "a dense pattern"),
    "sliding window": (
        nnx.make_attention_mask(POSITIONS, POSITIONS, lambda q, k: (k <= q) & (q - k < WINDOW)),
        "lower-triangular but not causal",
    ),
}
NNX = {
    "MultiHeadAttention": lambda: rfa.nnx.MultiHeadAttention(2, D, num_features=16, decode=False, rngs=nnx.Rngs(0)),
    "DeltaNet": lambda: rfa.nnx.DeltaNet(2, D, chunk_size=4, rngs=nnx.Rngs(0)),
    "GatedDeltaNet": lambda: rfa.nnx.GatedDeltaNet(2, D, chunk_size=4, rngs=nnx.Rngs(0)),
    "GatedLinearAttention": lambda: rfa.nnx.GatedLinearAttention(2, D, chunk_size=4, rngs=nnx.Rngs(0)),
    "KimiDeltaAttention": lambda: rfa.nnx.KimiDeltaAttention(2, D, chunk_size=4, rngs=nnx.Rngs(0)),
    "SlidingWindowAttention": lambda: rfa.nnx.SlidingWindowAttention(2, D, window=WINDOW, rngs=nnx.Rngs(0)),
}
LINEN = {
    "linen.MultiHeadDotProductAttention": lambda: rfa.linen.MultiHeadDotProductAttention(num_heads=2, num_features=16),
    "linen.GatedDeltaNet": lambda: rfa.linen.GatedDeltaNet(num_heads=2, chunk_size=4),
}


def _layer(name):
    """``(apply(x, mask), name of the layer in its errors, causal)``."""
    if name in NNX:
        graphdef, variables = nnx.split(NNX[name]())
        who = "kernelized attention" if name == "MultiHeadAttention" else name
        return lambda variables, x, mask: nnx.merge(graphdef, variables)(x, mask=mask), variables, who
    layer = LINEN[name]()
    variables = layer.init(jax.random.key(0), X)
    who = "kernelized attention" if "MultiHead" in name else name.removeprefix("linen.")
    return lambda variables, x, mask: layer.apply(variables, x, mask=mask), variables, who


def expected_dependence(mask, causal: bool, window: int | None) -> np.ndarray:
    """``[B, L, L]``: where output i depends on input j under ``mask``."""
    allowed = np.asarray(jnp.broadcast_to(mask, (B, 1, L, L))[:, 0] != 0)
    if causal:
        kept = allowed.any(-2)  # the keys some query sees: the tokens that are not padding
        allowed = allowed & np.tril(np.ones((L, L), bool)) & kept[:, :, None]
        if window is not None:
            rank = np.cumsum(kept, -1)
            allowed = allowed & (rank[:, :, None] - rank[:, None, :] < window)
    return allowed | (np.eye(L, dtype=bool) & allowed.any(-1, keepdims=True))  # its own query


@pytest.mark.parametrize(
    "name", tiered([*NNX, *LINEN], {"MultiHeadAttention", "GatedDeltaNet", "SlidingWindowAttention"})
)
def test_every_flax_mask_is_applied_exactly_or_refused_in_the_layer_s_words(name):
    apply, state, who = _layer(name)
    causal, window = "MultiHead" not in name, WINDOW if "SlidingWindow" in name else None
    jacobian = jax.jit(jax.jacrev(lambda x, mask: apply(state, x, mask)))  # [B, L, D, B, L, D]
    for found, mask in APPLIED.items():
        blocks = jnp.abs(jacobian(X, mask)).max(axis=(2, 5))
        depends = np.stack([np.asarray(blocks[b, :, b, :]) > 1e-7 for b in range(B)])
        np.testing.assert_array_equal(depends, expected_dependence(mask, causal, window), err_msg=found)
    for mask, found in REFUSED.values():
        with pytest.raises(rfa.InputError, match=f"^{who} cannot apply this mask") as refused:
            rfa.checks.checked(jax.jit(apply))(state, X, mask)
        assert found in str(refused.value)
