"""A Flax-example text classifier, trained by a plain optax loop: the model of a user who injects
``rfa.make_attention_fn`` into Flax's own ``nnx.MultiHeadAttention``
(``rfa.experiments.studies.estimators_in_models.measure``).
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import optax
from flax import nnx

from rfa.data.tokenizers import PAD_ID
from rfa.tasks import get_task, train_batches


class FlaxEncoder(nnx.Module):
    """A text classifier written as Flax's examples write one: token and learned position embeddings, pre-norm
    blocks of ``nnx.MultiHeadAttention`` and an MLP, mean pooling over the valid tokens, a linear head.

    ``attention_fns``: one ``attention_fn`` per layer (``rfa.make_attention_fn``, each site its own), or None
    for Flax's softmax attention.

    Example:
      >>> model = FlaxEncoder(vocab_size=20, num_classes=3, d_model=16, num_heads=2, mlp_dim=32, num_layers=2,
      ...                     max_length=8, attention_fns=None, rngs=nnx.Rngs(0))
      >>> nnx.jit(FlaxEncoder.__call__)(model, jnp.ones((4, 8), jnp.int32)).shape  # model(tokens), compiled
      (4, 3)
    """

    def __init__(
        self,
        *,
        vocab_size,
        num_classes,
        d_model,
        num_heads,
        mlp_dim,
        num_layers,
        max_length,
        attention_fns,
        rngs: nnx.Rngs,
    ):
        fns = attention_fns or [nnx.dot_product_attention] * num_layers
        self.embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
        self.positions = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (max_length, d_model)))
        self.layers = nnx.List([FlaxBlock(d_model, num_heads, mlp_dim, fn, rngs=rngs) for fn in fns])
        self.norm = nnx.LayerNorm(d_model, rngs=rngs)
        self.head = nnx.Linear(d_model, num_classes, rngs=rngs)

    def hidden(self, tokens):
        """The embeddings, the attention mask and the padding mask of ``tokens [batch, length]``."""
        keep = tokens != PAD_ID
        return self.embed(tokens) + self.positions[: tokens.shape[1]], nnx.make_attention_mask(keep, keep), keep

    def __call__(self, tokens):
        h, mask, keep = self.hidden(tokens)
        for layer in self.layers:
            h = layer(h, mask)
        pooled = jnp.sum(h * keep[..., None], axis=1) / jnp.maximum(keep.sum(1, keepdims=True), 1)
        return self.head(self.norm(pooled))


class FlaxBlock(nnx.Module):
    """``h + attention(norm(h))``, then ``h + mlp(norm(h))``."""

    def __init__(self, d_model, num_heads, mlp_dim, attention_fn, *, rngs: nnx.Rngs):
        self.norm_attention = nnx.LayerNorm(d_model, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(num_heads, d_model, attention_fn=attention_fn, decode=False, rngs=rngs)
        self.norm_mlp = nnx.LayerNorm(d_model, rngs=rngs)
        self.mlp_in, self.mlp_out = nnx.Linear(d_model, mlp_dim, rngs=rngs), nnx.Linear(mlp_dim, d_model, rngs=rngs)

    def qkv(self, h):
        """The layer's queries, keys and values ``[batch, length, heads, head_dim]``."""
        x = self.norm_attention(h)
        return self.attention.query(x), self.attention.key(x), self.attention.value(x)

    def __call__(self, h, mask):
        h = h + self.attention(self.norm_attention(h), mask=mask)
        return h + self.mlp_out(nnx.gelu(self.mlp_in(self.norm_mlp(h))))


def train_flax(model: FlaxEncoder, config, steps: int, seed: int) -> None:
    """``steps`` AdamW steps (the config's peak rate and weight decay, constant) of cross-entropy on the task's
    training batches."""
    o = config.optimizer
    optimizer = nnx.Optimizer(model, optax.adamw(o.learning_rate, weight_decay=o.weight_decay), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, batch):
        def loss(model):
            losses = optax.softmax_cross_entropy_with_integer_labels(model(batch["inputs"]), batch["label"])
            return jnp.sum(losses * batch["weight"]) / jnp.maximum(batch["weight"].sum(), 1.0)

        optimizer.update(model, nnx.grad(loss)(model))

    batches = train_batches(
        get_task(config.task),
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        seed=seed,
    )
    for batch in itertools.islice(batches, steps):
        step(model, optimizer, {name: jnp.asarray(value) for name, value in batch.items()})
