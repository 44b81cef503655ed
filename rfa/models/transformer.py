"""The three model kinds: encoder-decoder (translation), decoder-only (language model) and
encoder-only (sequence classification), with the attention of each site chosen by the config.

Vaswani et al., "Attention Is All You Need", NeurIPS 2017: token embeddings scaled by √d_model
plus positional encodings, N layers, output logits tied to the (target) embedding.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rfa._dtypes import at_least_float32
from rfa._validation import InputError, InputTypeError, is_concrete
from rfa.attention.segments import sequence_positions
from rfa.checks import raise_if
from rfa.layers.feature_variables import redraw
from rfa.layers.positional import PositionalEmbedding
from rfa.layers.softmax import check_slot
from rfa.models.blocks import DecoderLayer, EncoderLayer
from rfa.models.config import EncoderConfig, TransformerConfig

Array = jax.Array
EMBED_INIT = nnx.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)  # nnx.Embed's


def check_tokens(tokens, name: str, vocab_size: int, max_length: int) -> Array:
    """Checks ``tokens [batch, length]`` are integers of ``[0, vocab_size)``: eagerly now, under ``jit`` when the
    program runs (:func:`rfa.checks.raise_if`; an id outside would read no embedding row and give NaN logits)."""
    if not hasattr(tokens, "dtype") or not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise InputTypeError(
            f"{name} must be an integer array of token ids, got {getattr(tokens, 'dtype', type(tokens))}."
        )
    if tokens.ndim != 2:
        raise InputError(f"{name} must have shape [batch, length], got {tuple(tokens.shape)}.")
    if tokens.shape[1] > max_length:
        raise InputError(f"{name} has length {tokens.shape[1]} > config.max_length = {max_length}.")
    if not tokens.size:
        return jnp.asarray(tokens)

    def message(low, high) -> str:
        return f"{name} holds ids outside [0, {vocab_size}): min {low}, max {high}."

    if is_concrete(tokens):
        ids = np.asarray(tokens)  # on the host: jnp.min would be traced under an enclosing transformation
        if not 0 <= ids.min() <= ids.max() < vocab_size:
            raise InputError(message(ids.min(), ids.max()))
        return jnp.asarray(tokens)
    raise_if((tokens < 0) | (tokens >= vocab_size), message, values=(jnp.min(tokens), jnp.max(tokens)))
    return tokens


def check_step(token, position, vocab_size: int, max_length: int) -> Array:
    """A decoding step's ``token [batch]`` (ids of ``[0, vocab_size)``) and ``position`` (in ``[0, max_length)``),
    checked as :func:`check_tokens` does; a cache with fewer slots checks its own. :func:`rfa.models.decoding.
    generate`'s loop turns these checks off: its tokens and positions are its own."""
    if getattr(token, "ndim", None) != 1:
        raise InputError(f"token must have shape [batch], got {getattr(token, 'shape', type(token).__name__)}.")
    check_slot(position, max_length, "config.max_length")
    return check_tokens(token[:, None], "token", vocab_size, max_length)[:, 0]


def check_key_mask(key_mask, tokens: Array) -> Array:
    """Checks a model's ``key_mask``: booleans of the tokens' shape ``[batch, length]`` (True: a token, False:
    padding); an additive float mask (0 and −inf) is refused, as is any other dtype or shape."""
    if getattr(key_mask, "dtype", None) != jnp.bool_ or key_mask.shape != tokens.shape:
        raise InputError(
            f"key_mask must be a boolean array of the tokens' shape {tuple(tokens.shape)} (True: a token), got "
            f"{getattr(key_mask, 'dtype', type(key_mask).__name__)} {tuple(getattr(key_mask, 'shape', ()))}; an "
            "additive mask (0 and -inf) is not one: pass key_mask = additive == 0."
        )
    return key_mask


def check_packing(segment_ids, tokens: Array) -> tuple[Array | None, Array]:
    """A model's ``segment_ids`` (None, or integers of the tokens' shape: packed sequences, Flax's convention)
    checked, and the positions they give: each token's within its sequence (:func:`rfa.attention.segments.
    sequence_positions`), or the slots ``0 … length − 1`` of every row without them."""
    if segment_ids is None:
        return None, _positions(tokens)
    dtype = getattr(segment_ids, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.integer) or segment_ids.shape != tokens.shape:
        raise InputError(
            f"segment_ids must be an integer array of the tokens' shape {tuple(tokens.shape)} (one id per packed "
            f"sequence), got {dtype or type(segment_ids).__name__} {tuple(getattr(segment_ids, 'shape', ()))}."
        )
    return jnp.asarray(segment_ids), sequence_positions(segment_ids)


def check_prompt_end(prompt, pad_id: int) -> None:
    """Outside ``jit`` (as the ids' range in :func:`check_tokens`), refuses a prompt whose last token is padding."""
    if is_concrete(prompt) and prompt.size and np.any(np.asarray(prompt)[:, -1] == pad_id):
        raise InputError(
            "a prompt ends with padding (config.pad_id): the logits after a prompt are read at its last position, "
            "and decoding continues every row at one position. Left-pad prompts of different lengths; the rfa.nnx "
            "and rfa.linen layers decode right-padded prompts (their caches skip padding wherever it sits)."
        )


class Embedder(nnx.Module):
    """Token embedding × √d_model, plus absolute positions (sinusoidal or learned), then dropout."""

    def __init__(self, vocab_size: int, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.tokens = nnx.Embed(vocab_size, config.d_model, dtype=jnp.dtype(config.dtype), rngs=rngs)
        self.scale = math.sqrt(config.d_model)
        self.positions = (
            PositionalEmbedding(config.max_length, config.d_model, kind=config.positional, init=EMBED_INIT, rngs=rngs)
            if config.positional in ("sinusoidal", "learned")
            else None
        )  # relative and rotary positions act inside attention
        self.dropout = nnx.Dropout(config.dropout_rate, rngs=rngs)

    def __call__(self, tokens: Array, positions: Array) -> Array:
        x = self.tokens(tokens) * self.scale
        if self.positions is not None:
            x = x + self.positions(positions).astype(x.dtype)
        return self.dropout(x)

    def token(self, token: Array, position: Array) -> Array:
        """The embedding ``[batch, d_model]`` of one token per row, ``token [batch]``, at ``position``."""
        return self(token[:, None], jnp.broadcast_to(position, token.shape)[:, None])[:, 0]

    def logits(self, x: Array) -> Array:
        """Output logits tied to the embedding matrix (paper, Sec. 3.4), at least float32."""
        return at_least_float32(self.tokens.attend(x))


def _positions(tokens: Array) -> Array:
    return jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)


class EncoderStack(nnx.Module):
    """``num_encoder_layers`` encoder layers (and the final LayerNorm of a pre-norm stack)."""

    def __init__(self, config: EncoderConfig, *, rngs: nnx.Rngs):
        self.layers = nnx.List([EncoderLayer(config, layer=i, rngs=rngs) for i in range(config.num_encoder_layers)])
        self.final_norm = nnx.LayerNorm(config.d_model, rngs=rngs) if config.norm == "pre" else None

    def __call__(self, x: Array, *, key_mask: Array, positions: Array) -> Array:
        for layer in self.layers:
            x = layer(x, key_mask=key_mask, positions=positions)
        return x if self.final_norm is None else self.final_norm(x)


class DecoderStack(nnx.Module):
    def __init__(self, config: TransformerConfig, *, cross: bool, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [DecoderLayer(config, cross=cross, layer=i, rngs=rngs) for i in range(config.num_decoder_layers)]
        )
        self.final_norm = nnx.LayerNorm(config.d_model, rngs=rngs) if config.norm == "pre" else None

    def __call__(self, x: Array, **kwargs) -> Array:
        for layer in self.layers:
            x = layer(x, **kwargs)
        return self._final(x)

    def _final(self, x: Array) -> Array:
        return x if self.final_norm is None else self.final_norm(x)

    def init_cache(self, batch: int, max_length: int | None, config: TransformerConfig) -> list:
        """Empty per-layer self-attention caches for ``max_length`` tokens (default ``config.max_length``)."""
        length = _checked_cache_length(max_length, config)
        return [{"self": layer.self_attention.init_cache(batch, length)} for layer in self.layers]

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int) -> tuple[Array, list]:
        """The stack over a whole prompt (no cross-attention): the last layer's output and each layer's cache."""
        caches = []
        for layer in self.layers:
            x, cache = layer.prefill(x, key_mask=key_mask, positions=positions, max_length=max_length)
            caches.append(cache)
        return self._final(x), caches

    def decode_step(self, x: Array, caches: list, position: Array, keep: Array, memories=None):
        new_caches = []
        for i, layer in enumerate(self.layers):
            x, cache = layer.decode_step(x, caches[i], position, keep, None if memories is None else memories[i])
            new_caches.append(cache)
        return self._final(x), new_caches


def _checked_cache_length(max_length: int | None, config: TransformerConfig, *, at_least: int = 1) -> int:
    """The cache slots asked for (default ``config.max_length``), checked to be in ``[at_least, config.max_length]``."""
    length = config.max_length if max_length is None else max_length
    integer = isinstance(length, numbers.Integral) and not isinstance(length, bool)
    if not integer or not at_least <= length <= config.max_length:
        raise InputError(
            f"cache length must be an int in [{at_least}, config.max_length = {config.max_length}], got {length!r}."
        )
    return int(length)


redraw_projections = redraw  # one function with rfa.nnx.redraw (the old name, kept for one release)


class Decoder(nnx.Module):
    """Decoder-only language model: ``tokens [batch, length] -> logits [batch, length, vocab]``."""

    def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.embed = Embedder(config.vocab_size, config, rngs=rngs)
        self.stack = DecoderStack(config, cross=False, rngs=rngs)

    def __call__(self, tokens: Array, *, key_mask: Array | None = None, segment_ids: Array | None = None) -> Array:
        """Logits of every position.

        Args:
          tokens: ``[batch, length]`` ids of ``[0, vocab_size)`` (checked under ``jit`` too).
          key_mask: ``[batch, length]`` bools, True at a token (default: the tokens other than ``config.pad_id``).
          segment_ids: ``[batch, length]`` integers: several sequences packed in a row (Flax's convention), each
            computed as if alone, its positions counted from 0; None: one sequence per row.
        """
        tokens = check_tokens(tokens, "tokens", self.config.vocab_size, self.config.max_length)
        key_mask = tokens != self.config.pad_id if key_mask is None else check_key_mask(key_mask, tokens)
        segment_ids, positions = check_packing(segment_ids, tokens)
        x = self.stack(self.embed(tokens, positions), key_mask=key_mask, positions=positions, segment_ids=segment_ids)
        return self.embed.logits(x)

    def init_cache(self, batch: int, max_length: int | None = None) -> list:
        """Empty decoding caches for ``batch`` sequences of up to ``max_length`` tokens."""
        return self.stack.init_cache(batch, max_length, self.config)

    def prefill(self, prompt: Array, max_length: int | None = None) -> tuple[Array, list]:
        """The next-token logits after ``prompt`` and the caches holding it, from one parallel pass.

        The causal forward pass over the prompt (as :meth:`__call__`) gives the logits at its last
        position; each layer's self-attention cache is built from the same pass — the prompt's keys
        and values in the first P slots (exact), or the recurrent state ``Σ_j φ(k_j)[v_j, 1]ᵀ``
        (kernelized, Katharopoulos et al., ICML 2020) — so :meth:`decode_step` continues at
        position P exactly as after P token-by-token steps, with P times fewer sequential steps.

        Args:
          prompt: ``[batch, P]`` token ids, P >= 1; padding tokens are left out of the caches. A prompt
            whose last token is padding raises ``rfa.InputError`` outside ``jit`` (right padding: left-pad instead).
          max_length: cache slots, in ``[P, config.max_length]`` (default ``config.max_length``):
            the prompt plus every token to be decoded.

        Returns:
          ``(logits [batch, vocab] of the token after the prompt, caches)``.

        Example:
          >>> from rfa.models import preset
          >>> model, prompt = Decoder(preset("tiny", vocab_size=50), rngs=nnx.Rngs(0)), jnp.array([[5, 6, 7]])
          >>> logits, cache = model.prefill(prompt, max_length=prompt.shape[1] + 16)
          >>> logits, cache = model.decode_step(jnp.argmax(logits, -1), cache, prompt.shape[1])
          >>> logits.shape
          (1, 50)
        """
        prompt = check_tokens(prompt, "prompt", self.config.vocab_size, self.config.max_length)
        if prompt.shape[1] < 1:
            raise InputError(f"prompt must hold at least one token, got shape {tuple(prompt.shape)}.")
        length = _checked_cache_length(max_length, self.config, at_least=prompt.shape[1])
        check_prompt_end(prompt, self.config.pad_id)
        positions = _positions(prompt)
        x, caches = self.stack.prefill(
            self.embed(prompt, positions), key_mask=prompt != self.config.pad_id, positions=positions, max_length=length
        )
        return self.embed.logits(x[:, -1]), caches

    def decode_step(self, token: Array, cache: list, position: Array) -> tuple[Array, list]:
        """Logits ``[batch, vocab]`` of the next token after ``token [batch]`` at ``position``."""
        token = check_step(token, position, self.config.vocab_size, self.config.max_length)
        keep = token != self.config.pad_id
        x, cache = self.stack.decode_step(self.embed.token(token, position), cache, position, keep)
        return self.embed.logits(x), cache


class EncoderDecoder(nnx.Module):
    """The paper's Transformer: ``(source [b, S], target_in [b, T]) -> logits [b, T, target_vocab]``."""

    def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.source_embed = Embedder(config.vocab_size, config, rngs=rngs)
        self.target_embed = Embedder(config.output_vocab_size, config, rngs=rngs)
        self.encoder = EncoderStack(config, rngs=rngs)
        self.decoder = DecoderStack(config, cross=True, rngs=rngs)

    def encode(self, source: Array) -> tuple[Array, Array]:
        """Encoder output ``[b, S, d_model]`` and the source key mask ``[b, S]`` (False at padding)."""
        source = check_tokens(source, "source", self.config.vocab_size, self.config.max_length)
        mask, positions = source != self.config.pad_id, _positions(source)
        return self.encoder(self.source_embed(source, positions), key_mask=mask, positions=positions), mask

    def decode(self, target_in: Array, memory: Array, memory_mask: Array) -> Array:
        target_in = check_tokens(target_in, "target_in", self.config.output_vocab_size, self.config.max_length)
        positions = _positions(target_in)
        x = self.decoder(
            self.target_embed(target_in, positions),
            key_mask=target_in != self.config.pad_id,
            positions=positions,
            memory=memory,
            memory_mask=memory_mask,
            memory_positions=_positions(memory_mask),
        )
        return self.target_embed.logits(x)

    def __call__(self, source: Array, target_in: Array) -> Array:
        if getattr(source, "shape", (None,))[:1] != getattr(target_in, "shape", (None,))[:1]:
            raise InputError(
                f"source and target_in must have the same batch size, got source {getattr(source, 'shape', None)} "
                f"and target_in {getattr(target_in, 'shape', None)}."
            )
        memory, memory_mask = self.encode(source)
        return self.decode(target_in, memory, memory_mask)

    def init_cache(self, batch: int, max_length: int | None = None) -> list:
        """Empty decoding caches for ``batch`` targets of up to ``max_length`` tokens."""
        return self.decoder.init_cache(batch, max_length, self.config)

    def prepare_memory(self, memory: Array, memory_mask: Array) -> list:
        """Each layer's cross-attention keys/values or state, computed once per source."""
        return [layer.cross_attention.prepare_memory(memory, memory_mask) for layer in self.decoder.layers]

    def decode_step(self, token: Array, cache: list, position: Array, memories: list) -> tuple[Array, list]:
        """Logits ``[batch, target vocab]`` after target ``token [batch]`` at ``position``, attending to
        ``memories`` (:meth:`prepare_memory`)."""
        token = check_step(token, position, self.config.output_vocab_size, self.config.max_length)
        keep = token != self.config.pad_id
        x, cache = self.decoder.decode_step(self.target_embed.token(token, position), cache, position, keep, memories)
        return self.target_embed.logits(x), cache


class Encoder(nnx.Module):
    """Encoder-only classifier: ``tokens [b, L] -> class logits [b, num_classes]`` (mean or CLS pooling)."""

    def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.embed = Embedder(config.vocab_size, config, rngs=rngs)
        self.encoder = EncoderStack(config, rngs=rngs)
        self.classifier = nnx.Linear(config.d_model, config.num_classes, rngs=rngs)

    def __call__(self, tokens: Array) -> Array:
        tokens = check_tokens(tokens, "tokens", self.config.vocab_size, self.config.max_length)
        mask, positions = tokens != self.config.pad_id, _positions(tokens)
        x = self.encoder(self.embed(tokens, positions), key_mask=mask, positions=positions)
        if self.config.pooling == "cls":
            pooled = x[:, 0]
        else:
            weights = mask[..., None].astype(x.dtype)
            pooled = (x * weights).sum(1) / jnp.maximum(weights.sum(1), 1)
        return at_least_float32(self.classifier(pooled))
