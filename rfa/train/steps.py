"""Losses, metric sums and the jitted train / eval steps of every model kind (text and images).

Steps are pure functions of ``(state, batch, step)`` where ``state = nnx.split((model,
optimizer))[1]``: they merge the state into modules, run, and split again, so ``jax.jit`` can
donate the state and keep its sharding. Metrics leave a step as sums (``loss``, ``nll``,
``correct``, ``weight``, ``tokens``, and for seq2seq ``sequences_correct`` / ``sequences``),
which add across steps, devices and evaluation batches; :func:`summarize` turns them into
means (``tokens`` counts pixels for images). ``loss`` is the training objective (label-smoothed
when smoothing is on), ``nll`` the plain cross-entropy that the reported loss and perplexity come
from. Sequence accuracy is the teacher-forced exact match: every target token of a sequence, EOS included, is the argmax
given the true prefix. Dropout keys are ``fold_in(key(seed), step)`` set by ``nnx.reseed``, so a step's
randomness depends only on the seed and the step — a resumed run repeats it exactly.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from rfa.data.tasks import KINDS
from rfa.data.tokenizers import BOS_ID, PAD_ID


def shift_right(targets: jax.Array) -> jax.Array:
    """Teacher-forcing decoder inputs: ``[BOS, t_1, ..., t_{T-1}]`` (padding stays padding)."""
    return jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)


def _logits_labels_weights(model: nnx.Module, batch: dict, kind: str):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}.")
    if kind == "seq2seq":
        targets = batch["targets"]
        return model(batch["inputs"], shift_right(targets)), targets, (targets != PAD_ID).astype(jnp.float32)
    if kind == "lm":
        return model(batch["inputs"]), batch["targets"], (batch["targets"] != PAD_ID).astype(jnp.float32)
    return model(batch["image" if kind == "image_classification" else "inputs"]), batch["label"], batch["weight"]


def forecast_sums(model: nnx.Module, batch: dict) -> dict:
    """Summed squared (``loss``, ``nll``) and absolute errors of a forecasting batch, the forecast values counted
    (``weight``) and the lookback steps read (``tokens``)."""
    errors = model(batch["inputs"]) - batch["targets"]
    weights = jnp.broadcast_to(batch["weight"][:, None, None], errors.shape)
    squared = (jnp.square(errors) * weights).sum()
    return {
        "loss": squared,
        "nll": squared,
        "absolute": (jnp.abs(errors) * weights).sum(),
        "weight": weights.sum(),
        "tokens": batch["weight"].sum() * batch["inputs"].shape[1],
    }


def metric_sums(model: nnx.Module, batch: dict, *, kind: str, label_smoothing: float = 0.0) -> dict:
    """Summed loss (label-smoothed cross-entropy), NLL, correct predictions, weights and tokens of a batch
    (for forecasting, :func:`forecast_sums`)."""
    if kind == "forecast":
        return forecast_sums(model, batch)
    logits, labels, weights = _logits_labels_weights(model, batch, kind)
    logits = logits.astype(jnp.float32)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    if label_smoothing:
        smoothed = optax.smooth_labels(jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing)
        loss = optax.softmax_cross_entropy(logits, smoothed)
    else:
        loss = nll
    correct = (logits.argmax(-1) == labels).astype(jnp.float32)
    if kind == "image_classification":  # pixels of the images that count
        tokens = weights.sum() * math.prod(batch["image"].shape[1:3])
    else:
        tokens = (batch["inputs"] != PAD_ID).sum()
    if kind == "seq2seq":
        tokens += (batch["targets"] != PAD_ID).sum()
    sums = {
        "loss": (loss * weights).sum(),
        "nll": (nll * weights).sum(),
        "correct": (correct * weights).sum(),
        "weight": weights.sum(),
        "tokens": tokens.astype(jnp.float32),
    }
    if kind == "seq2seq":
        present = weights.any(-1)
        sums["sequences_correct"] = (
            (jnp.all((correct > 0) | (weights == 0), axis=-1) & present).sum().astype(jnp.float32)
        )
        sums["sequences"] = present.sum().astype(jnp.float32)
    return sums


def summarize(sums: dict, *, kind: str) -> dict:
    """Means from metric sums.

    ``loss`` (cross-entropy), ``accuracy``; ``perplexity = exp(loss)`` for token tasks (seq2seq,
    lm); ``sequence_accuracy`` for seq2seq; ``smoothed_loss`` (the objective) when it differs.
    Forecasting: ``loss`` = ``mse``, and ``mae``, of the normalised series.
    """
    sums = {name: float(value) for name, value in sums.items()}
    weight = max(sums["weight"], 1e-9)
    if kind == "forecast":  # errors of the normalised series
        return {"loss": sums["nll"] / weight, "mse": sums["nll"] / weight, "mae": sums["absolute"] / weight}
    metrics = {"loss": sums["nll"] / weight, "accuracy": sums["correct"] / weight}
    if sums["loss"] != sums["nll"]:
        metrics["smoothed_loss"] = sums["loss"] / weight
    if kind in ("seq2seq", "lm"):
        metrics["perplexity"] = math.exp(min(sums["nll"] / weight, 700.0))
    if kind == "seq2seq":
        metrics["sequence_accuracy"] = sums["sequences_correct"] / max(sums["sequences"], 1e-9)
    return metrics


def make_train_step(graphdef: nnx.GraphDef, *, kind: str, label_smoothing: float, seed: int, state_sharding=None):
    """``(state, batch, step) -> (state, sums)``: one optimizer step, jitted with the state donated."""
    dropout_key = jax.random.fold_in(jax.random.key(seed), 0x0D12)

    def train_step(state, batch, step):
        model, optimizer = nnx.merge(graphdef, state)
        nnx.reseed(model, dropout=jax.random.fold_in(dropout_key, step))

        def objective(model):
            sums = metric_sums(model, batch, kind=kind, label_smoothing=label_smoothing)
            return sums["loss"] / jnp.maximum(sums["weight"], 1.0), sums

        grads, sums = nnx.grad(objective, has_aux=True)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), sums

    return jax.jit(train_step, donate_argnums=0, out_shardings=(state_sharding, None))


def make_eval_step(graphdef: nnx.GraphDef, *, kind: str):
    """``(state, batch) -> sums`` with dropout off and no label smoothing, jitted."""

    def eval_step(state, batch):
        model, _ = nnx.merge(graphdef, state)
        model.eval()
        return metric_sums(model, batch, kind=kind)

    return jax.jit(eval_step)
