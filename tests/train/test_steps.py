"""Metric sums and their summaries for every model kind, label smoothing included, against NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rfa.tasks import shift_right
from rfa.train.steps import metric_sums, summarize

VOCAB, PAD = 7, 0


class FixedLogits:
    """A stand-in model returning given logits; records what it was called with."""

    def __init__(self, logits):
        self.logits, self.calls = jnp.asarray(logits), []

    def __call__(self, *args):
        self.calls.append(args)
        return self.logits


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def numpy_sums(logits, labels, weights, smoothing):
    """Cross-entropy with labels smoothed as (1 - α)·onehot + α/V (Szegedy et al. 2016), NLL, correct, weight."""
    log_p = log_softmax(logits)
    onehot = np.eye(logits.shape[-1])[labels]
    smoothed = (1 - smoothing) * onehot + smoothing / logits.shape[-1]
    nll = -np.sum(onehot * log_p, -1)
    loss = -np.sum(smoothed * log_p, -1)
    correct = np.argmax(logits, -1) == labels
    return {
        "loss": (loss * weights).sum(),
        "nll": (nll * weights).sum(),
        "correct": (correct * weights).sum(),
        "weight": weights.sum(),
    }


def check(sums, expected):
    for name, value in expected.items():
        assert float(sums[name]) == pytest.approx(value, rel=1e-5, abs=1e-6), name


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_classification_sums(smoothing):
    logits = np.random.default_rng(0).standard_normal((4, VOCAB)).astype(np.float32)
    batch = {
        "inputs": np.array([[3, 4, 0], [5, 0, 0], [6, 6, 6], [2, 0, 0]], np.int32),
        "label": np.array([0, 3, 6, 1], np.int32),
        "weight": np.array([1, 1, 1, 0], np.float32),
    }
    sums = jax.jit(lambda b: metric_sums(FixedLogits(logits), b, kind="classification", label_smoothing=smoothing))(
        batch
    )
    check(sums, numpy_sums(logits, batch["label"], batch["weight"], smoothing) | {"tokens": 7})
    metrics = summarize(sums, kind="classification")
    expected = numpy_sums(logits, batch["label"], batch["weight"], smoothing)
    assert metrics["loss"] == pytest.approx(expected["nll"] / 3, rel=1e-5)
    assert metrics["accuracy"] == pytest.approx(expected["correct"] / 3)
    assert "perplexity" not in metrics and ("smoothed_loss" in metrics) == (smoothing > 0)
    if smoothing:
        assert metrics["smoothed_loss"] == pytest.approx(expected["loss"] / 3, rel=1e-5)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_language_model_sums_weigh_out_padding(smoothing):
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 5, VOCAB)).astype(np.float32)
    targets = np.array([[3, 4, 5, 2, 0], [6, 1, 0, 0, 0]], np.int32)
    batch = {"inputs": np.array([[1, 3, 4, 5, 2], [1, 6, 1, 0, 0]], np.int32), "targets": targets}
    sums = metric_sums(FixedLogits(logits), batch, kind="lm", label_smoothing=smoothing)
    weights = (targets != PAD).astype(np.float64)
    check(sums, numpy_sums(logits, targets, weights, smoothing) | {"tokens": 8})
    metrics = summarize(sums, kind="lm")
    nll = numpy_sums(logits, targets, weights, 0.0)["nll"] / 6
    assert metrics["loss"] == pytest.approx(nll, rel=1e-5)
    assert metrics["perplexity"] == pytest.approx(np.exp(nll), rel=1e-5)


@pytest.mark.slow
def test_seq2seq_sums_and_sequence_accuracy():
    """Exact match of the non-padding targets; rows: all right, one wrong, wrong at padding only, empty."""
    targets = np.array([[3, 4, 2, 0], [5, 6, 2, 0], [4, 2, 0, 0], [0, 0, 0, 0]], np.int32)
    predicted = targets.copy()
    predicted[1, 1] = 3  # a wrong token: row 1 is not an exact match
    predicted[2, 3] = 5  # wrong only where the target is padding: still an exact match
    logits = 5.0 * np.eye(VOCAB, dtype=np.float32)[predicted] + 0.1 * np.random.default_rng(2).standard_normal(
        (4, 4, VOCAB)
    ).astype(np.float32)
    model = FixedLogits(logits)
    batch = {"inputs": np.array([[3, 4, 0], [6, 5, 0], [4, 0, 0], [0, 0, 0]], np.int32), "targets": targets}
    sums = metric_sums(model, batch, kind="seq2seq")
    np.testing.assert_array_equal(model.calls[0][1], shift_right(jnp.asarray(targets)))  # teacher forcing
    weights = (targets != PAD).astype(np.float64)
    check(sums, numpy_sums(logits, targets, weights, 0.0) | {"tokens": 5 + 8, "sequences": 3, "sequences_correct": 2})
    metrics = summarize(sums, kind="seq2seq")
    assert metrics["sequence_accuracy"] == pytest.approx(2 / 3)
    assert metrics["accuracy"] == pytest.approx(7 / 8)


def test_shift_right_starts_with_bos_and_keeps_padding():
    np.testing.assert_array_equal(shift_right(jnp.array([[5, 6, 2, 0]])), [[1, 5, 6, 2]])
