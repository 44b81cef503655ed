"""Associative recall (MQAR, :mod:`rfa.data.mqar`) with the decoder-only model: recall the value of each queried key.

Batches: ``inputs [B, L]`` (pairs, then queries among random ids) and ``targets [B, L]``: the value at each
query position, 0 (not counted) elsewhere. The sizes are the config's: ``config.recall.vocab_size`` and
``num_pairs``, the length ``config.max_length``; the model's vocabulary is ``config.recall.vocab_size``.
Metrics: cross-entropy and accuracy at query positions.
"""

from __future__ import annotations

from rfa.data.mqar import check_sizes, mqar_config
from rfa.data.pipeline import load_source, stream
from rfa.tasks.base import TaskKind, register_task_kind
from rfa.tasks.common import cross_entropy_summary, transformer_config
from rfa.tasks.lm import LanguageModel


class Recall(LanguageModel):
    """The language model's decoder, forward pass and metric sums (targets of 0 do not count), on MQAR's examples."""

    name = "recall"
    description = "an associative-recall language model"
    curves = ("loss", "accuracy")
    rows_are_examples = True  # one sequence per example, not packed documents
    answer = TaskKind.answer  # token ids, no text to answer

    def check_task(self, task):
        if task.tokenizer is not None or task.targets is None:
            raise ValueError("a recall task reads token ids and their targets: no tokenizer, and targets.")

    def check_config(self, config):
        check_sizes(config.recall.vocab_size, config.recall.num_pairs, config.max_length)

    def data_options(self, config):
        r = config.recall
        return {"vocab_size": r.vocab_size, "num_pairs": r.num_pairs, "num_train": r.num_train, "num_eval": r.num_eval}

    def source(self, task, split, *, data_dir, max_length, vocab_size, num_pairs, num_train, num_eval):
        sizes = mqar_config(vocab_size, num_pairs, max_length, num_train=num_train, num_eval=num_eval)
        return load_source(task, split, data_dir, sizes)

    def examples(self, task, dataset, *, max_length):
        return stream(dataset).map(lambda ex: {"inputs": ex[task.inputs], "targets": ex[task.targets]})

    def model_config(self, config, task, attention, *, sequence_axis):
        return transformer_config(
            config, task, attention, sequence_axis=sequence_axis, vocab_size=config.recall.vocab_size
        )

    def summarize(self, sums):
        return cross_entropy_summary(sums)


register_task_kind(Recall())
