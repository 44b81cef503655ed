"""Compiled model calls shared by the model tests: one program per model structure, reused across tests."""

import jax
import jax.numpy as jnp
import optax
from flax import nnx

VOCAB = 23


@nnx.jit
def forward(model, *inputs):
    """The model's forward pass, compiled as one program (eager op-by-op dispatch is far slower)."""
    return model(*inputs)


def tokens(key, shape, low=1):
    return jax.random.randint(jax.random.key(key), shape, low, VOCAB)


@nnx.jit
def decode_step(model, token, cache, position, memories):
    """One decoding step, compiled once per model structure and shared by the tests."""
    if memories is None:
        return model.decode_step(token, cache, position)
    return model.decode_step(token, cache, position, memories)


@nnx.jit
def encode(model, source):
    """The encoder output, its mask and the cross-attention memories decoding prepares from them."""
    memory, mask = model.encode(source)
    return memory, mask, model.prepare_memory(memory, mask)


def step_by_step(model, target, memories=None):
    cache = model.init_cache(target.shape[0], target.shape[1])
    logits = []
    for t in range(target.shape[1]):
        out, cache = decode_step(model, target[:, t], cache, jnp.asarray(t), memories)
        logits.append(out)
    return jnp.stack(logits, 1)


@nnx.jit
def next_token_step(model, optimizer, sequence):
    """One optimizer step of next-token cross-entropy on ``sequence [batch, L]``; returns the loss before it."""

    def loss(model):
        logits = model(sequence[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, sequence[:, 1:]).mean()

    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value


@nnx.jit
def packed_forward(model, tokens, segment_ids):
    """The model's forward pass over packed rows, compiled once per model structure."""
    return model(tokens, segment_ids=segment_ids)


def packed_and_alone(model, lengths, vocab):
    """Sequences of ``lengths`` (random ids of ``[1, vocab)``) packed into one row, then right-padded by two
    padding tokens of their own segment: ``(the packed row's logits at the sequences' tokens, each sequence's own
    logits)``, both ``[sum(lengths), vocab]``."""
    sequences = [jax.random.randint(jax.random.key(i), (n,), 1, vocab) for i, n in enumerate(lengths)]
    row = jnp.concatenate([*sequences, jnp.zeros(2, jnp.int32)])[None]
    segment_ids = jnp.concatenate([jnp.full(n, i + 1) for i, n in enumerate([*lengths, 2])])[None]
    packed = packed_forward(model, row, segment_ids)[0, : sum(lengths)]
    return packed, jnp.concatenate([forward(model, s[None])[0] for s in sequences])
