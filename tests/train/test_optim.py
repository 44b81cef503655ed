"""AdamW of rfa's training loop decays weights only: not biases, norms' scales or the delta rule's A_log and dt_bias."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

import rfa
from rfa.train import make_optimizer


class _Block(nnx.Module):
    def __init__(self, rngs):
        self.norm = nnx.LayerNorm(16, rngs=rngs)
        self.mixer = rfa.nnx.GatedDeltaNet(2, 16, conv_bias=True, rngs=rngs)
        self.head = nnx.Linear(16, 4, rngs=rngs)


def test_a_step_of_zero_gradients_shrinks_the_weights_and_leaves_the_rest():
    """With zero gradients AdamW's step is ``−lr · wd · p`` on a decayed parameter and nothing on the others."""
    config = ml_collections.ConfigDict(
        dict(
            learning_rate=0.1,
            warmup_steps=0,
            schedule="constant",
            b1=0.9,
            b2=0.99,
            eps=1e-8,
            weight_decay=0.5,
            grad_clip_norm=0.0,
        )
    )
    model = _Block(nnx.Rngs(0))
    before = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))
    optimizer = nnx.Optimizer(model, make_optimizer(config, num_steps=10, d_model=16), wrt=nnx.Param)
    for _ in range(2):  # the schedule's rate is 0 at step 0, 0.1 from step 1
        optimizer.update(model, jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param)))
    after = nnx.state(model, nnx.Param)
    decayed, kept = [], []
    for (path, old), (_, new) in zip(nnx.to_flat_state(before), nnx.to_flat_state(after), strict=True):
        name = ".".join(map(str, path))
        if np.array_equal(np.asarray(new), old):
            kept.append(name)
        else:
            np.testing.assert_allclose(np.asarray(new), old * (1 - 0.1 * 0.5), rtol=1e-6, err_msg=name)
            decayed.append(name)
    assert {"mixer.A_log", "mixer.dt_bias", "mixer.o_norm.scale", "norm.scale", "norm.bias", "head.bias"} <= set(kept)
    assert {"mixer.q_conv1d.bias", "mixer.k_conv1d.bias"} <= set(kept)
    assert {"mixer.q_proj.kernel", "mixer.q_conv1d.weight", "mixer.o_proj.kernel", "head.kernel"} <= set(decayed)
