"""Sequence classification (the encoder classifier): a label for a text.

Batches: ``inputs [B, L]`` (truncated to L), ``label [B]``, ``weight [B]`` (0 for the empty rows that fill
the last evaluation batch). Metrics: cross-entropy and accuracy. Answers are the predicted class.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from rfa.data.pipeline import pad, stream
from rfa.data.tokenizers import PAD_ID
from rfa.models import Encoder
from rfa.tasks.base import TaskKind, register_task_kind
from rfa.tasks.common import cross_entropy_summary, cross_entropy_sums, transformer_config


class Classification(TaskKind):
    name = "classification"
    description = "a classifier"

    def check_task(self, task):
        if task.tokenizer is None or task.targets is None:
            raise ValueError("a classification task reads a text and a label: it needs a tokenizer and targets.")

    def examples(self, task, dataset, *, max_length):
        encode = task.tokenizer.encode
        dataset = dataset.map(
            lambda ex: {"inputs": encode(ex[task.inputs])[:max_length], "label": np.int32(ex[task.targets])}
        )
        return stream(dataset).map(
            lambda ex: {"inputs": pad(ex["inputs"], max_length), "label": ex["label"], "weight": np.float32(1)}
        )

    def model_config(self, config, task, attention, *, sequence_axis):
        return transformer_config(config, task, attention, sequence_axis=sequence_axis)

    def build_model(self, model_config, rngs):
        return Encoder(model_config, rngs=rngs)

    def forward(self, model, batch):
        return model(batch["inputs"]), batch["label"], batch["weight"]

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        sums, _ = cross_entropy_sums(*self.forward(model, batch), label_smoothing=label_smoothing)
        return sums | {"tokens": (batch["inputs"] != PAD_ID).sum().astype(jnp.float32)}

    def summarize(self, sums):
        return cross_entropy_summary(sums)

    def answer(self, model, task, text, *, max_length, max_new_tokens, beam_size):
        logits = model(jnp.asarray(task.tokenizer.encode(text))[None])
        return str(int(np.argmax(logits[0])))


register_task_kind(Classification())
