"""Text-to-text inference from a training workdir's newest checkpoint.

  rfa decode --workdir workdir/train/sort/positive --input dcba --input hello
  rfa decode --workdir DIR --input_file inputs.txt [--beam_size 4] [--max_new_tokens 64]

Each input (one per ``--input`` or per line of the file) is tokenized with the task's tokenizer
and answered by the trained model: a seq2seq model decodes the target (greedy, or beam search),
a language model continues the text, a classifier prints the class. Prints ``input<TAB>output``.
"""

from __future__ import annotations

import sys

import ml_collections
from absl import flags
from flax import nnx

from rfa.experiments.common.cli import run_main
from rfa.tasks import Task, task_kind
from rfa.train import CheckpointError, load_model
from rfa.workdir import ConfigError

_WORKDIR = flags.DEFINE_string("workdir", None, "A training workdir (config.json and checkpoints/).")
_INPUTS = flags.DEFINE_multi_string("input", [], "An input text (repeatable).")
_INPUT_FILE = flags.DEFINE_string("input_file", None, "A file with one input per line.")
_MAX_NEW_TOKENS = flags.DEFINE_integer(
    "max_new_tokens", 0, "Tokens to produce (0: as many as the model's length allows)."
)
_BEAM_SIZE = flags.DEFINE_integer("beam_size", 1, "1: greedy decoding; > 1: beam search (seq2seq).")
flags.mark_flag_as_required("workdir")


def answer(model: nnx.Module, config: ml_collections.ConfigDict, task: Task, text: str) -> str:
    """The model's output for one input text, as its task kind answers (``TaskKind.answer``)."""
    if task.tokenizer is None:
        raise ConfigError(f"{config.task!r} reads no text ({task.kind} task): there is nothing to decode.")
    ids = task.tokenizer.encode(text)
    if not 0 < len(ids) <= config.max_length:
        raise ConfigError(f"input {text!r} has {len(ids)} tokens; the model takes 1 to {config.max_length}.")
    return task_kind(task.kind).answer(
        model,
        task,
        text,
        max_length=config.max_length,
        max_new_tokens=_MAX_NEW_TOKENS.value,
        beam_size=_BEAM_SIZE.value,
    )


def main(argv):
    del argv
    inputs = list(_INPUTS.value)
    if _INPUT_FILE.value:
        with open(_INPUT_FILE.value) as f:
            inputs += [line.rstrip("\n") for line in f if line.strip()]
    if not inputs:
        sys.exit("error: give inputs with --input TEXT (repeatable) or --input_file FILE.")
    try:
        model, config, task, step = load_model(_WORKDIR.value)
        print(f"# {config.task} / {config.attention.variant}, checkpoint step {step}", file=sys.stderr)
        for text in inputs:
            print(f"{text}\t{answer(model, config, task, text)}")
    except (ConfigError, CheckpointError, ValueError) as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    run_main(main)
