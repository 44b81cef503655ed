"""Autoregressive decoding with caches: greedy, temperature / top-k sampling and beam search, jitted.

Self-attention keeps a cache per layer (keys/values for exact attention, the recurrent state
``(S, z)`` for kernelized attention, whose cost per token does not grow with the position);
cross-attention's encoder side is prepared once per source. A :class:`~rfa.models.Decoder`
continues a prompt ``[batch, prompt_len]`` (no padding inside it); an
:class:`~rfa.models.EncoderDecoder` translates a source ``[batch, source_len]`` starting from ``bos_id``.
Decode with the model in evaluation mode (``model.eval()``), or dropout stays on.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.models.transformer import Decoder, EncoderDecoder, check_tokens

Array = jax.Array


def _start(model, inputs: Array, total_length: int, repeat: int = 1):
    """Caches after the prompt (or the prepared source), the last logits and the next position."""
    if isinstance(model, EncoderDecoder):
        memory, memory_mask = model.encode(inputs)
        memories = model.prepare_memory(jnp.repeat(memory, repeat, 0), jnp.repeat(memory_mask, repeat, 0))
        batch = inputs.shape[0] * repeat
        return model.init_cache(batch, total_length), memories, None, 0
    prompt = jnp.repeat(inputs, repeat, 0)
    cache = model.init_cache(prompt.shape[0], total_length)

    def consume(cache, token_position):
        token, position = token_position
        logits, cache = model.decode_step(token, cache, position)
        return cache, logits

    cache, logits = jax.lax.scan(consume, cache, (prompt.T, jnp.arange(prompt.shape[1])))
    return cache, None, logits[-1], prompt.shape[1]


def _step(model, token, cache, position, memories):
    if memories is None:
        return model.decode_step(token, cache, position)
    return model.decode_step(token, cache, position, memories)


def _choose(logits: Array, key: Array, temperature: float, top_k: int | None) -> Array:
    if temperature == 0.0:
        return jnp.argmax(logits, axis=-1)
    logits = logits / temperature
    if top_k is not None:
        kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    return jax.random.categorical(key, logits, axis=-1)


def _cache_length(model, inputs: Array, max_new_tokens: int) -> int:
    """Slots for every position decoding writes: the prompt (or bos) and each new token."""
    return (inputs.shape[1] if isinstance(model, Decoder) else 1) + max_new_tokens


def _check_decoding(model, inputs, max_new_tokens: int, bos_id: int, eos_id: int | None) -> None:
    """Raises a clear error for anything the jitted decoders could only get wrong silently."""
    if not isinstance(model, Decoder | EncoderDecoder):
        raise TypeError(f"decoding needs a Decoder or an EncoderDecoder, got {type(model).__name__}.")
    config = model.config
    check_tokens(inputs, "inputs", config.vocab_size, config.max_length)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}.")
    if inputs.shape[1] < 1:
        raise ValueError("inputs must hold at least one token (the prompt or the source).")
    if _cache_length(model, inputs, max_new_tokens) > config.max_length:
        raise ValueError(
            f"decoding {max_new_tokens} tokens after {inputs.shape[1] if isinstance(model, Decoder) else 'bos'} "
            f"needs {_cache_length(model, inputs, max_new_tokens)} positions > config.max_length = {config.max_length}."
        )
    for name, token in (("bos_id", bos_id), ("eos_id", eos_id)):
        if token is not None and not 0 <= token < config.output_vocab_size:
            raise ValueError(f"{name} must be a token of [0, {config.output_vocab_size}), got {token}.")
    if isinstance(model, EncoderDecoder) and bos_id == config.pad_id:
        raise ValueError(f"bos_id = {bos_id} is the padding token: the first target would be masked out.")
    dropouts = [m for _, m in nnx.iter_modules(model) if isinstance(m, nnx.Dropout)]
    if any(m.rate > 0 and not m.deterministic for m in dropouts):
        raise ValueError("the model is in training mode (dropout on): call model.eval() before decoding.")


def generate(
    model: Decoder | EncoderDecoder,
    inputs: Array,
    *,
    max_new_tokens: int,
    bos_id: int = 1,
    eos_id: int | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    key: Array | None = None,
) -> tuple[Array, Array]:
    """Greedy (``temperature=0``) or sampled decoding of ``max_new_tokens`` tokens.

    Args:
      model: a Decoder (``inputs`` = prompt ``[batch, P]``, P >= 1, no padding inside) or an
        EncoderDecoder (``inputs`` = source ``[batch, S]``; decoding starts from ``bos_id``), in
        evaluation mode.
      max_new_tokens: tokens to produce; the prompt (or bos) plus them must fit ``config.max_length``.
      bos_id: first target token of the encoder-decoder (not the padding token).
      eos_id: after it a sequence produces only ``eos_id``.
      temperature, top_k: sampling from ``softmax(logits / temperature)`` restricted to the top k.
      key: PRNG key, required when ``temperature > 0``.

    Returns:
      ``(tokens [batch, max_new_tokens], logits [batch, max_new_tokens, vocab])``, the logits each
      token was chosen from.

    Example:
      >>> tokens, logits = generate(model, prompt, max_new_tokens=16)
    """
    _check_decoding(model, inputs, max_new_tokens, bos_id, eos_id)
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0: greedy), got {temperature}.")
    if temperature > 0 and key is None:
        raise ValueError("sampling (temperature > 0) needs a PRNG key.")
    if top_k is not None and not 1 <= top_k <= model.config.output_vocab_size:
        raise ValueError(f"top_k must be None or in [1, {model.config.output_vocab_size}], got {top_k}.")
    key = jax.random.key(0) if key is None else key
    return _generate(model, inputs, max_new_tokens=max_new_tokens, bos_id=bos_id, eos_id=eos_id,
                     temperature=float(temperature), top_k=top_k, key=key)  # fmt: skip


@functools.partial(nnx.jit, static_argnames=("max_new_tokens", "bos_id", "eos_id", "temperature", "top_k"))
def _generate(model, inputs, *, max_new_tokens, bos_id, eos_id, temperature, top_k, key):
    """The jitted body of :func:`generate`, which has checked every argument."""
    cache, memories, logits, position = _start(model, inputs, _cache_length(model, inputs, max_new_tokens))
    if logits is None:  # encoder-decoder: the first step consumes bos
        logits, cache = _step(model, jnp.full(inputs.shape[:1], bos_id), cache, 0, memories)
        position = 1

    def body(carry, step_key):
        cache, logits, position, finished = carry
        token = _choose(logits, step_key, temperature, top_k)
        if eos_id is not None:
            token = jnp.where(finished, eos_id, token)
            finished = finished | (token == eos_id)
        next_logits, cache = _step(model, token, cache, position, memories)
        return (cache, next_logits, position + 1, finished), (token, logits)

    finished = jnp.zeros(inputs.shape[:1], jnp.bool_)
    _, (tokens, chosen_from) = jax.lax.scan(
        body, (cache, logits, position, finished), jax.random.split(key, max_new_tokens)
    )
    return tokens.T, jnp.swapaxes(chosen_from, 0, 1)


def beam_search(
    model: Decoder | EncoderDecoder,
    inputs: Array,
    *,
    beam_size: int,
    max_new_tokens: int,
    bos_id: int = 1,
    eos_id: int | None = None,
    length_penalty: float = 0.0,
) -> tuple[Array, Array]:
    """Beam search: the ``beam_size`` most likely continuations per input, best first.

    Beams are pruned by their summed log-probabilities; the returned scores are divided by
    ``((5 + length)/6)^length_penalty`` (Wu et al., 2016; the length counts tokens up to and
    including ``eos_id``) and sorted. The penalty thus reorders the final beams but does not guide
    pruning. A finished beam only extends with ``eos_id`` at no cost. Arguments as in :func:`generate`.

    Returns:
      ``(tokens [batch, beam_size, max_new_tokens], scores [batch, beam_size])``.

    Example:
      >>> tokens, scores = beam_search(model, source, beam_size=4, max_new_tokens=20, eos_id=2)
    """
    _check_decoding(model, inputs, max_new_tokens, bos_id, eos_id)
    vocab = model.config.output_vocab_size
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or not 1 <= beam_size <= vocab:
        raise ValueError(f"beam_size must be an int in [1, {vocab}], got {beam_size!r}.")
    return _beam_search(model, inputs, beam_size=beam_size, max_new_tokens=max_new_tokens, bos_id=bos_id,
                        eos_id=eos_id, length_penalty=float(length_penalty))  # fmt: skip


@functools.partial(nnx.jit, static_argnames=("beam_size", "max_new_tokens", "bos_id", "eos_id", "length_penalty"))
def _beam_search(model, inputs, *, beam_size, max_new_tokens, bos_id, eos_id, length_penalty):
    """The jitted body of :func:`beam_search`, which has checked every argument."""
    batch = inputs.shape[0]
    cache, memories, logits, position = _start(
        model, inputs, _cache_length(model, inputs, max_new_tokens), repeat=beam_size
    )
    if logits is None:
        logits, cache = _step(model, jnp.full((batch * beam_size,), bos_id), cache, 0, memories)
        position = 1
    vocab = logits.shape[-1]
    # Only the first beam is live at the start: the others would duplicate it.
    scores = jnp.tile(jnp.where(jnp.arange(beam_size) == 0, 0.0, -jnp.inf), (batch, 1))
    tokens = jnp.zeros((batch, beam_size, max_new_tokens), jnp.int32)
    finished = jnp.zeros((batch, beam_size), jnp.bool_)
    lengths = jnp.zeros((batch, beam_size), jnp.int32)

    def body(carry, t):
        cache, logits, scores, tokens, finished, lengths = carry
        log_probs = jax.nn.log_softmax(logits).reshape(batch, beam_size, vocab)
        if eos_id is not None:
            only_eos = jnp.where(jnp.arange(vocab) == eos_id, 0.0, -jnp.inf)
            log_probs = jnp.where(finished[..., None], only_eos, log_probs)
        candidates = (scores[..., None] + log_probs).reshape(batch, beam_size * vocab)
        scores, index = jax.lax.top_k(candidates, beam_size)
        parent, token = index // vocab, (index % vocab).astype(jnp.int32)
        gather = (parent + beam_size * jnp.arange(batch)[:, None]).reshape(-1)
        cache = jax.tree.map(lambda x: x[gather], cache)
        tokens = jnp.take_along_axis(tokens, parent[..., None], axis=1).at[:, :, t].set(token)
        was_finished = jnp.take_along_axis(finished, parent, axis=1)
        lengths = jnp.take_along_axis(lengths, parent, axis=1) + (~was_finished).astype(jnp.int32)
        finished = was_finished | ((token == eos_id) if eos_id is not None else False)
        logits, cache = _step(model, token.reshape(-1), cache, position + t, memories)
        return (cache, logits, scores, tokens, finished, lengths), None

    carry = (cache, logits, scores, tokens, finished, lengths)
    (_, _, scores, tokens, _, lengths), _ = jax.lax.scan(body, carry, jnp.arange(max_new_tokens))
    normalized = scores / ((5.0 + lengths) / 6.0) ** length_penalty
    order = jnp.argsort(-normalized, axis=1)
    return jnp.take_along_axis(tokens, order[..., None], axis=1), jnp.take_along_axis(normalized, order, axis=1)
