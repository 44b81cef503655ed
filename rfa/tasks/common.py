"""Pieces several task kinds share: cross-entropy metric sums and their means, and the text models' config."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_collections
import optax

from rfa.models import TransformerConfig
from rfa.tasks.base import Task


def cross_entropy_sums(logits: jax.Array, labels: jax.Array, weights: jax.Array, *, label_smoothing: float) -> dict:
    """Summed ``loss`` (label-smoothed cross-entropy, the objective), ``nll`` (plain cross-entropy), ``correct``
    (argmax hits) and ``weight`` over the labels that count, with their ``correct`` per label for callers that
    need more: ``(sums, correct)``."""
    logits = logits.astype(jnp.float32)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    if label_smoothing:
        smoothed = optax.smooth_labels(jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing)
        loss = optax.softmax_cross_entropy(logits, smoothed)
    else:
        loss = nll
    correct = (logits.argmax(-1) == labels).astype(jnp.float32)
    sums = {
        "loss": (loss * weights).sum(),
        "nll": (nll * weights).sum(),
        "correct": (correct * weights).sum(),
        "weight": weights.sum(),
    }
    return sums, correct


def cross_entropy_summary(sums: dict, *, perplexity: bool = False) -> dict:
    """``loss`` (cross-entropy) and ``accuracy`` from :func:`cross_entropy_sums`; ``smoothed_loss`` (the
    objective) when it differs; ``perplexity = exp(loss)`` for token tasks."""
    weight = max(sums["weight"], 1e-9)
    metrics = {"loss": sums["nll"] / weight, "accuracy": sums["correct"] / weight}
    if sums["loss"] != sums["nll"]:
        metrics["smoothed_loss"] = sums["loss"] / weight
    if perplexity:
        metrics["perplexity"] = math.exp(min(sums["nll"] / weight, 700.0))
    return metrics


def transformer_config(
    config: ml_collections.ConfigDict, task: Task, attention, *, sequence_axis, vocab_size: int | None = None
) -> TransformerConfig:
    """The text models' config: vocabulary (the task's tokenizer's, unless ``vocab_size`` is given) and classes
    from the task, widths from ``config.model``, length ``config.max_length``, each site's attention from
    ``attention(site)``."""
    m = config.model
    return TransformerConfig(
        vocab_size=task.vocab_size if vocab_size is None else vocab_size,
        num_classes=max(task.num_classes, 2),
        d_model=m.d_model,
        num_heads=m.num_heads,
        mlp_dim=m.mlp_dim,
        num_encoder_layers=m.num_encoder_layers,
        num_decoder_layers=m.num_decoder_layers,
        dropout_rate=m.dropout_rate,
        norm=m.norm,
        positional=m.positional,
        max_length=config.max_length,
        pooling=m.pooling,
        encoder_attention=attention("encoder"),
        decoder_attention=attention("decoder"),
        cross_attention=attention("cross"),
        sequence_axis=sequence_axis,
    )
