"""Sequence to sequence (the encoder-decoder): a source text in, a target text out.

Batches: ``inputs [B, L]`` source ids and ``targets [B, L]`` target ids ending in EOS (pairs longer than L
are dropped). Training is teacher-forced: the decoder reads ``[BOS, t_1, ..., t_{T-1}]``. Metrics: the
cross-entropy of the target tokens, their accuracy, perplexity, and the sequence accuracy (every target
token of a sequence, EOS included, is the argmax given the true prefix). Answers are decoded greedily or
by beam search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rfa.data.pipeline import pad, stream
from rfa.data.tokenizers import BOS_ID, EOS_ID, PAD_ID
from rfa.models import EncoderDecoder, decoding
from rfa.tasks.base import SITES, TaskKind, register_task_kind
from rfa.tasks.common import cross_entropy_summary, cross_entropy_sums, transformer_config


def shift_right(targets: jax.Array) -> jax.Array:
    """Teacher-forcing decoder inputs: ``[BOS, t_1, ..., t_{T-1}]`` (padding stays padding)."""
    return jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)


class Seq2Seq(TaskKind):
    name = "seq2seq"
    description = "an encoder-decoder"
    rows_are_examples = False  # pairs longer than max_length are left out: known only once read
    sites = SITES

    def check_task(self, task):
        if task.tokenizer is None or task.targets is None:
            raise ValueError("a seq2seq task reads a source and a target text: it needs a tokenizer and targets.")

    def examples(self, task, dataset, *, max_length):
        encode = task.tokenizer.encode
        dataset = dataset.map(
            lambda ex: {
                "inputs": encode(ex[task.inputs]),
                "targets": np.append(encode(ex[task.targets]), np.int32(EOS_ID)),
            }
        ).filter(lambda ex: len(ex["inputs"]) <= max_length and len(ex["targets"]) <= max_length)
        return stream(dataset).map(lambda ex: {key: pad(ex[key], max_length) for key in ex})

    def model_config(self, config, task, attention, *, sequence_axis):
        return transformer_config(config, task, attention, sequence_axis=sequence_axis)

    def build_model(self, model_config, rngs):
        return EncoderDecoder(model_config, rngs=rngs)

    def forward(self, model, batch):
        targets = batch["targets"]
        return model(batch["inputs"], shift_right(targets)), targets, (targets != PAD_ID).astype(jnp.float32)

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        logits, labels, weights = self.forward(model, batch)
        sums, correct = cross_entropy_sums(logits, labels, weights, label_smoothing=label_smoothing)
        present = weights.any(-1)
        sums["sequences_correct"] = (jnp.all((correct > 0) | (weights == 0), axis=-1) & present).sum()
        sums["sequences"] = present.sum()
        sums["tokens"] = (batch["inputs"] != PAD_ID).sum() + (batch["targets"] != PAD_ID).sum()
        return {name: value.astype(jnp.float32) for name, value in sums.items()}

    def summarize(self, sums):
        metrics = cross_entropy_summary(sums, perplexity=True)
        metrics["sequence_accuracy"] = sums["sequences_correct"] / max(sums["sequences"], 1e-9)
        return metrics

    def answer(self, model, task, text, *, max_length, max_new_tokens, beam_size):
        ids = task.tokenizer.encode(text)
        source = np.zeros((1, max_length), np.int32)
        source[0, : len(ids)] = ids
        new_tokens = max_new_tokens or max_length - 1
        if beam_size > 1:
            beams, _ = decoding.beam_search(
                model, jnp.asarray(source), beam_size=beam_size, max_new_tokens=new_tokens, bos_id=BOS_ID, eos_id=EOS_ID
            )
            tokens = beams[:, 0]  # beams come best first
        else:
            tokens, _ = decoding.generate(
                model, jnp.asarray(source), max_new_tokens=new_tokens, bos_id=BOS_ID, eos_id=EOS_ID
            )
        return task.tokenizer.decode(np.asarray(tokens[0]))


register_task_kind(Seq2Seq())
