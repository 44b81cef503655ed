"""Train a model on a task from a config.

  rfa train --config <task>:<attention> --workdir DIR   (a shipped task config, or a file of yours)


Re-running on the same workdir resumes from its newest checkpoint; a workdir written by another
config is refused. Ctrl-C (SIGINT) or SIGTERM stops the run after the step in progress, with a
checkpoint of that step and one line on stderr; the exit status is 130 or 143, and the same
command resumes. Overrides: ``--config.num_train_steps=500``, ``--config.data_dir=/data/tfds``.
"""

from __future__ import annotations

import json

import jax
from absl import flags
from ml_collections import config_flags

from rfa.experiments.common.cli import run_main, run_training
from rfa.train import initialize_distributed, train_and_evaluate

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Training config: a shipped task (sort:positive) or a file (mine.py:positive)."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics and results.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    initialize_distributed()
    results = run_training(train_and_evaluate, _CONFIG.value, _WORKDIR.value)
    if jax.process_index() == 0:  # one copy of the results, however many processes
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    run_main(main)
