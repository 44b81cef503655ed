"""Optimizer and learning-rate schedule from a config: AdamW, warmup then cosine or inverse square root.

The schedules:

- ``"cosine"``: linear warmup to ``learning_rate`` over ``warmup_steps``, then cosine decay to
  ``learning_rate * final_fraction`` at ``num_steps`` (Loshchilov & Hutter, SGDR, 2017).
- ``"inverse_sqrt"``: Vaswani et al., "Attention Is All You Need" (2017), eq. 3,
  ``lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``, scaled by ``learning_rate``
  (1.0 gives the paper's schedule).
- ``"constant"``: linear warmup, then ``learning_rate``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import optax

SCHEDULES = ("cosine", "inverse_sqrt", "constant")
NO_WEIGHT_DECAY = ("bias", "scale", "A_log", "dt_bias")  # biases, norms' scales, the decay's parameters


def weight_decay_mask(params):
    """True where AdamW decays a parameter: every weight but biases, norms' scales (LayerNorm, RMSNorm) and the
    delta rule's ``A_log`` and ``dt_bias`` (Mamba2's and flash-linear-attention's ``_no_weight_decay``: decaying
    them would pull the decay rates toward ``A = 1`` and ``softplus(0)``, not toward small weights).

    ``params`` is any pytree whose dict keys name the parameters (``nnx.state(model, nnx.Param)``, Linen's
    ``params``); pass the function as ``optax.adamw(..., mask=weight_decay_mask)`` in a loop of your own.

    Example:
      >>> layer = rfa.nnx.GatedDeltaNet(2, 16, rngs=nnx.Rngs(0))
      >>> mask = weight_decay_mask(nnx.state(layer, nnx.Param))
      >>> mask["q_proj"]["kernel"].get_value(), mask["A_log"].get_value(), mask["o_norm"]["scale"].get_value()
      (True, False, False)
    """

    def decays(path, _) -> bool:
        names = [str(key.key) for key in path if isinstance(key, jax.tree_util.DictKey)]
        return not names or names[-1] not in NO_WEIGHT_DECAY

    return jax.tree_util.tree_map_with_path(decays, params)


def make_schedule(config: ml_collections.ConfigDict, *, num_steps: int, d_model: int) -> optax.Schedule:
    """The learning rate as a function of the step (``config`` is ``config.optimizer``).

    Example:
      >>> from rfa.train.config import task_config
      >>> schedule = make_schedule(task_config("sort", "positive").optimizer, num_steps=1000, d_model=64)
      >>> float(schedule(0))  # linear warmup from 0
      0.0
    """
    lr, warmup = config.learning_rate, config.warmup_steps
    if config.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, lr, warmup_steps=warmup, decay_steps=max(num_steps, warmup + 1), end_value=lr * config.final_fraction
        )
    if config.schedule == "inverse_sqrt":

        def inverse_sqrt(step):
            step = jnp.maximum(step, 1).astype(jnp.float32)
            return lr * d_model**-0.5 * jnp.minimum(step**-0.5, step * max(warmup, 1) ** -1.5)

        return inverse_sqrt
    if config.schedule == "constant":
        return optax.linear_schedule(0.0, lr, transition_steps=max(warmup, 1))
    raise ValueError(f"optimizer.schedule must be one of {SCHEDULES}, got {config.schedule!r}.")


def make_optimizer(config: ml_collections.ConfigDict, *, num_steps: int, d_model: int) -> optax.GradientTransformation:
    """Global-norm gradient clipping (0: none), then AdamW with the schedule (``config = config.optimizer``),
    decaying the weights of :func:`weight_decay_mask`.

    Example:
      >>> from rfa.train.config import task_config
      >>> model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
      >>> tx = make_optimizer(task_config("sort", "positive").optimizer, num_steps=1000, d_model=64)
      >>> optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    """
    adamw = optax.adamw(
        make_schedule(config, num_steps=num_steps, d_model=d_model),
        b1=config.b1,
        b2=config.b2,
        eps=config.eps,
        weight_decay=config.weight_decay,
        mask=weight_decay_mask,
    )
    return optax.chain(optax.clip_by_global_norm(config.grad_clip_norm), adamw) if config.grad_clip_norm else adamw
