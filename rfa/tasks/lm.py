"""Language modelling (the decoder-only model): the next token of a text.

Batches: the split read as one stream of documents, each ended by EOS, cut into windows of L + 1:
``inputs = w[:-1]``, ``targets = w[1:]``. Metrics: cross-entropy, accuracy and perplexity of the next token.
Answers continue the input text greedily.
"""

from __future__ import annotations

import grain
import jax.numpy as jnp
import numpy as np

from rfa.data.pipeline import stream
from rfa.data.tokenizers import EOS_ID, PAD_ID
from rfa.models import Decoder, decoding
from rfa.tasks.base import TaskKind, register_task_kind
from rfa.tasks.common import cross_entropy_summary, cross_entropy_sums, transformer_config


class LanguageModel(TaskKind):
    name = "lm"
    description = "a language model"
    rows_are_examples = False  # documents are packed into rows
    sites = ("decoder",)
    curves = ("loss", "accuracy", "perplexity")

    def check_task(self, task):
        if task.tokenizer is None:
            raise ValueError("a language-modelling task reads text: it needs a tokenizer.")

    def examples(self, task, dataset, *, max_length):
        encode = task.tokenizer.encode
        documents = dataset.map(lambda ex: {"inputs": np.append(encode(ex[task.inputs]), np.int32(EOS_ID))})
        windows = grain.experimental.ConcatThenSplitIterDataset(
            stream(documents), length_struct={"inputs": max_length + 1}
        )
        return windows.map(lambda ex: {"inputs": ex["inputs"][:-1], "targets": ex["inputs"][1:]})

    def model_config(self, config, task, attention, *, sequence_axis):
        return transformer_config(config, task, attention, sequence_axis=sequence_axis)

    def build_model(self, model_config, rngs):
        return Decoder(model_config, rngs=rngs)

    def forward(self, model, batch):
        return model(batch["inputs"]), batch["targets"], (batch["targets"] != PAD_ID).astype(jnp.float32)

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        sums, _ = cross_entropy_sums(*self.forward(model, batch), label_smoothing=label_smoothing)
        return sums | {"tokens": (batch["inputs"] != PAD_ID).sum().astype(jnp.float32)}

    def summarize(self, sums):
        return cross_entropy_summary(sums, perplexity=True)

    def answer(self, model, task, text, *, max_length, max_new_tokens, beam_size):
        ids = task.tokenizer.encode(text)
        limit = max_length - len(ids)
        if limit < 1:
            raise ValueError(f"input {text!r} fills the model's {max_length} positions; nothing can follow.")
        tokens, _ = decoding.generate(model, jnp.asarray(ids)[None], max_new_tokens=min(max_new_tokens or limit, limit))
        return task.tokenizer.decode(np.asarray(tokens[0]))


register_task_kind(LanguageModel())
