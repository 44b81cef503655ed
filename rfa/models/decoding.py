"""Autoregressive decoding with caches: greedy, temperature / top-k sampling and beam search, jitted.

Self-attention keeps a cache per layer (keys/values for exact attention, the recurrent state
``(S, z)`` for kernelized attention, whose cost per token does not grow with the position). A
:class:`~rfa.models.Decoder` continues a prompt ``[batch, prompt_len]`` (no padding inside it),
consumed in one parallel pass (:meth:`~rfa.models.Decoder.prefill`); an
:class:`~rfa.models.EncoderDecoder` translates a source ``[batch, source_len]``, encoded and
prepared for cross-attention once, starting from ``bos_id``. Beam search runs this prompt pass once
per input and repeats the resulting caches for its beams. Decode with the model in evaluation mode
(``model.eval()``), or dropout stays on.
"""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp
from flax import nnx

from rfa import checks
from rfa._validation import InputError, InputTypeError
from rfa.models.transformer import Decoder, EncoderDecoder, check_prompt_end, check_tokens

Array = jax.Array


def _start(model, inputs: Array, total_length: int, bos_id: int):
    """The prompt pass: ``(caches, memories, logits [batch, vocab], position)`` before the first new token.

    A decoder prefills its prompt in one parallel pass; an encoder-decoder encodes the source,
    prepares every layer's cross-attention memory (``memories``, None for a decoder) and consumes bos.
    """
    if isinstance(model, EncoderDecoder):
        memories = model.prepare_memory(*model.encode(inputs))
        cache = model.init_cache(inputs.shape[0], total_length)
        logits, cache = model.decode_step(jnp.full(inputs.shape[:1], bos_id), cache, 0, memories)
        return cache, memories, logits, 1
    logits, cache = model.prefill(inputs, total_length)
    return cache, None, logits, inputs.shape[1]


def _step(model, token, cache, position, memories):
    """One decoding step of the loop, its checks of values off: the token is the loop's own choice and the
    position within the cache :func:`_check_decoding` sized (a check would put a host call in every token)."""
    with checks.enabled(False):
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
    return (1 if isinstance(model, EncoderDecoder) else inputs.shape[1]) + max_new_tokens


def _settings(model):
    """What decoding reads of a model (``vocab_size``, ``output_vocab_size``, ``max_length``, ``pad_id``): a
    :class:`~rfa.models.causal_lm.CausalLM`'s decoder config, or the model's config."""
    return getattr(model, "lm", None) or model.config


def _is_decoder(model) -> bool:
    """A decoder-only model: a :class:`~rfa.models.Decoder`, or another with ``prefill(prompt, max_length)``,
    ``decode_step(token, cache, position)`` and :func:`_settings` (a pretrained family's
    :class:`~rfa.models.causal_lm.CausalLM`)."""
    return isinstance(model, Decoder) or (callable(getattr(model, "prefill", None)) and hasattr(model, "config"))


def _check_decoding(model, inputs, max_new_tokens: int, bos_id: int, eos_id: int | None) -> None:
    """Raises a clear error for anything the jitted decoders could only get wrong silently."""
    if not (isinstance(model, EncoderDecoder) or _is_decoder(model)):
        raise InputTypeError(
            f"decoding needs a Decoder, an EncoderDecoder or a decoder-only family's model, got {type(model).__name__}."
        )
    config = _settings(model)
    check_tokens(inputs, "inputs", config.vocab_size, config.max_length)
    if not isinstance(model, EncoderDecoder) and config.pad_id is not None:
        check_prompt_end(inputs, config.pad_id)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}.")
    if inputs.shape[1] < 1:
        raise InputError("inputs must hold at least one token (the prompt or the source).")
    if _cache_length(model, inputs, max_new_tokens) > config.max_length:
        raise InputError(
            f"decoding {max_new_tokens} tokens after {'bos' if isinstance(model, EncoderDecoder) else inputs.shape[1]} "
            f"needs {_cache_length(model, inputs, max_new_tokens)} positions > config.max_length = {config.max_length}."
        )
    for name, token in (("bos_id", bos_id), ("eos_id", eos_id)):
        if token is not None and not 0 <= token < config.output_vocab_size:
            raise InputError(f"{name} must be a token of [0, {config.output_vocab_size}), got {token}.")
    if isinstance(model, EncoderDecoder) and bos_id == config.pad_id:
        raise InputError(f"bos_id = {bos_id} is the padding token: the first target would be masked out.")
    dropouts = [m for _, m in nnx.iter_modules(model) if isinstance(m, nnx.Dropout)]
    if any(m.rate > 0 and not m.deterministic for m in dropouts):
        raise InputError("the model is in training mode (dropout on): call model.eval() before decoding.")


def generate(
    model,
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
      model: a Decoder or a pretrained family's :class:`~rfa.models.causal_lm.CausalLM` (``inputs`` = prompt
        ``[batch, P]``, P >= 1, left-padded with the padding token) or an
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
      >>> from rfa.models import Decoder, preset
      >>> model = Decoder(preset("tiny", vocab_size=50), rngs=nnx.Rngs(0))  # tiny: no dropout
      >>> tokens, logits = generate(model, jnp.array([[5, 6, 7]]), max_new_tokens=4)
      >>> tokens.shape, logits.shape
      ((1, 4), (1, 4, 50))
    """
    _check_decoding(model, inputs, max_new_tokens, bos_id, eos_id)
    if not temperature >= 0:
        raise InputError(f"temperature must be >= 0 (0: greedy), got {temperature}.")
    if temperature > 0 and key is None:
        raise InputError("sampling (temperature > 0) needs a PRNG key.")
    if top_k is not None and not 1 <= top_k <= _settings(model).output_vocab_size:
        raise InputError(f"top_k must be None or in [1, {_settings(model).output_vocab_size}], got {top_k}.")
    key = jax.random.key(0) if key is None else key
    return _generate(
        model,
        inputs,
        max_new_tokens=max_new_tokens,
        bos_id=bos_id,
        eos_id=eos_id,
        temperature=float(temperature),
        top_k=top_k,
        key=key,
    )


@functools.partial(nnx.jit, static_argnames=("max_new_tokens", "bos_id", "eos_id", "temperature", "top_k"))
def _generate(model, inputs, *, max_new_tokens, bos_id, eos_id, temperature, top_k, key):
    """The jitted body of :func:`generate`, which has checked every argument."""
    cache, memories, logits, position = _start(model, inputs, _cache_length(model, inputs, max_new_tokens), bos_id)

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
    """Beam search with GNMT's length penalty: the ``beam_size`` best hypotheses per input, best first.

    A hypothesis ``Y`` that ends (emits ``eos_id``) is scored ``log P(Y) / lp(|Y|)`` with
    ``lp(n) = ((5 + n) / 6)^α``, ``α = length_penalty`` and ``|Y|`` counting the tokens up to and
    including ``eos_id`` (Wu et al., "Google's Neural Machine Translation System", 2016, Sec. 7).
    As in flax's ``examples/wmt/decode.py``, the search keeps two sets per input:

    - ``beam_size`` live hypotheses, ranked by their log-probability: at each step the ``2 ·
      beam_size`` most likely one-token extensions are formed, so that ``beam_size`` remain live
      even if ``beam_size`` of them end;
    - a pool of ``beam_size`` finished hypotheses, ranked by the penalized score: an extension
      that emits ``eos_id`` leaves the live set and enters the pool if its score beats the pool's
      worst. The penalty thus chooses the hypotheses kept during the search, not only their final
      order, and an ended hypothesis never takes a live slot.

    Log-probabilities only fall as a hypothesis grows, so a live one can at best end with
    ``log P / lp(max_new_tokens)`` for α >= 0 (``lp`` at the next length for α < 0); the search
    stops early once no input's best live hypothesis can reach the worst score of its full pool.
    The result is the pool, best first; where it holds fewer than ``beam_size`` hypotheses (none,
    for ``eos_id=None``), the remaining slots take the live hypotheses of length ``max_new_tokens``,
    best first, scored ``log P / lp(max_new_tokens)`` — flax falls back to them when none ended.
    Tokens after ``eos_id`` are ``eos_id``. Arguments as in :func:`generate`.

    Args:
      beam_size: hypotheses kept, in ``[1, output vocabulary]``.
      length_penalty: α >= 0 favours longer hypotheses (0.6 to 1 in GNMT; 0: plain log-probability).

    Returns:
      ``(tokens [batch, beam_size, max_new_tokens], scores [batch, beam_size])``: finished
      hypotheses by score, then unfinished ones by score.

    Example:
      >>> from rfa.models import EncoderDecoder, preset
      >>> model = EncoderDecoder(preset("tiny", vocab_size=50), rngs=nnx.Rngs(0))
      >>> source = jnp.array([[5, 6, 7, 0]])  # 0 = padding
      >>> tokens, scores = beam_search(model, source, beam_size=4, max_new_tokens=6, eos_id=2, length_penalty=0.6)
      >>> tokens.shape, scores.shape
      ((1, 4, 6), (1, 4))
    """
    _check_decoding(model, inputs, max_new_tokens, bos_id, eos_id)
    vocab = _settings(model).output_vocab_size
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or not 1 <= beam_size <= vocab:
        raise InputError(f"beam_size must be an int in [1, {vocab}], got {beam_size!r}.")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real):
        raise InputTypeError(f"length_penalty must be a real number (alpha), got {length_penalty!r}.")
    if not math.isfinite(length_penalty):
        raise InputError(f"length_penalty must be finite, got {length_penalty}.")
    return _beam_search(
        model,
        inputs,
        beam_size=beam_size,
        max_new_tokens=max_new_tokens,
        bos_id=bos_id,
        eos_id=eos_id,
        length_penalty=float(length_penalty),
    )


def _take(x: Array, index: Array) -> Array:
    """``x [batch, n, ...]`` at ``index [batch, m]`` along axis 1: ``[batch, m, ...]``."""
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


@functools.partial(nnx.jit, static_argnames=("beam_size", "max_new_tokens", "bos_id", "eos_id", "length_penalty"))
def _beam_search(model, inputs, *, beam_size, max_new_tokens, bos_id, eos_id, length_penalty):
    """The jitted body of :func:`beam_search`, which has checked every argument."""
    batch, k = inputs.shape[0], beam_size
    cache, memories, logits, position = _start(model, inputs, _cache_length(model, inputs, max_new_tokens), bos_id)
    # The prompt pass ran once per input; its beams start from copies of its caches.
    cache, memories, logits = jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), (cache, memories, logits))
    vocab = logits.shape[-1]
    extensions = min(2 * k, k * vocab)

    def penalty(length):
        return ((5.0 + length) / 6.0) ** length_penalty

    def not_done(state):
        t, _, _, _, live_log_probs, _, finished_scores = state
        bound_length = max_new_tokens if length_penalty >= 0 else t + 1
        best_live = live_log_probs[:, 0] / penalty(bound_length)
        # An empty pool slot scores -inf, so a pool that is not full never stops the search.
        return (t < max_new_tokens) & ~jnp.all(finished_scores[:, -1] > best_live)

    def extend(state):
        t, cache, logits, live_tokens, live_log_probs, finished_tokens, finished_scores = state
        log_probs = live_log_probs[..., None] + jax.nn.log_softmax(logits).reshape(batch, k, vocab)
        top_log_probs, index = jax.lax.top_k(log_probs.reshape(batch, k * vocab), extensions)
        parent, token = index // vocab, (index % vocab).astype(jnp.int32)
        top_tokens = _take(live_tokens, parent).at[:, :, t].set(token)
        # A -inf extension (of a start-up duplicate beam) is no hypothesis: it never enters the pool.
        ends = (token == eos_id) & jnp.isfinite(top_log_probs) if eos_id is not None else jnp.zeros_like(token, bool)
        live_log_probs, live = jax.lax.top_k(jnp.where(ends, -jnp.inf, top_log_probs), k)
        ended_scores = jnp.where(ends, top_log_probs / penalty(t + 1), -jnp.inf)
        finished_scores, best = jax.lax.top_k(jnp.concatenate([finished_scores, ended_scores], axis=1), k)
        finished_tokens = _take(jnp.concatenate([finished_tokens, top_tokens], axis=1), best)
        rows = (_take(parent, live) + k * jnp.arange(batch)[:, None]).reshape(-1)
        cache = jax.tree.map(lambda x: x[rows], cache)
        logits, cache = _step(model, _take(token, live).reshape(-1), cache, position + t, memories)
        return t + 1, cache, logits, _take(top_tokens, live), live_log_probs, finished_tokens, finished_scores

    # Only the first beam is live at the start: the others would duplicate it.
    live_log_probs = jnp.tile(jnp.where(jnp.arange(k) == 0, 0.0, -jnp.inf), (batch, 1))
    no_tokens = jnp.full((batch, k, max_new_tokens), 0 if eos_id is None else eos_id, jnp.int32)
    state = (0, cache, logits, no_tokens, live_log_probs, no_tokens, jnp.full((batch, k), -jnp.inf))
    _, _, _, live_tokens, live_log_probs, finished_tokens, finished_scores = jax.lax.while_loop(not_done, extend, state)
    # Slots the pool leaves empty take the live hypotheses, which then have max_new_tokens tokens.
    pooled = jnp.sum(jnp.isfinite(finished_scores), axis=1, keepdims=True)
    from_pool = jnp.arange(k) < pooled
    live = jnp.clip(jnp.arange(k) - pooled, 0, k - 1)
    tokens = jnp.where(from_pool[..., None], finished_tokens, _take(live_tokens, live))
    scores = jnp.where(from_pool, finished_scores, _take(live_log_probs, live) / penalty(max_new_tokens))
    return tokens, scores
