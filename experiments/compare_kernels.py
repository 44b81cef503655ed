"""The kernel comparison on real tasks: train every (task, attention) pair and tabulate the results.

  python -m experiments.compare_kernels --config configs/compare_kernels.py --workdir workdir/train
  python -m experiments.compare_kernels --config configs/compare_kernels.py --config.tasks=sort,listops ...

Each pair trains from ``configs/<task>.py:<attention>`` in ``<workdir>/<task>/<attention>`` (a
finished pair is read back, an interrupted one resumes), then the table — task, attention, m,
final accuracy / perplexity, step time, tokens/s, XLA step memory, in the order of
``config.attention`` (exact first by default) — is printed and written to ``--output`` (JSON) and beside it as markdown.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from experiments.tables import training_table, write_json
from rfa.data import DatasetMissingError
from rfa.train import CheckpointError, train_and_evaluate
from rfa.workdir import ConfigError

_CONFIG = config_flags.DEFINE_config_file("config", "configs/compare_kernels.py", "Which tasks and attention kinds.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/train", "Parent of the per-(task, attention) workdirs.")
_OUTPUT = flags.DEFINE_string("output", "results/train_cpu.json", "JSON of the table ('' for none).")


def run(comparison, workdir: str) -> list[dict]:
    """Trains (or reads back) every pair of ``comparison`` (``configs/compare_kernels.py``); their results."""
    results = []
    for task in comparison.tasks:
        if importlib.util.find_spec(f"configs.{task}") is None:
            raise ConfigError(f"config.tasks names {task!r}, which has no configs/{task}.py.")
        module = importlib.import_module(f"configs.{task}")
        for attention in comparison.attention:
            config = module.get_config(f"{attention},quick" if comparison.quick else attention)
            config.data_dir = comparison.data_dir
            results.append(train_and_evaluate(config, os.path.join(workdir, task, attention)))
    return results


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    try:
        results = run(_CONFIG.value, _WORKDIR.value)
    except (ConfigError, DatasetMissingError, CheckpointError) as error:
        sys.exit(f"error: {error}")
    text = training_table(results)
    print(text)
    write_json(_OUTPUT.value, results)
    if _OUTPUT.value:
        with open(os.path.splitext(_OUTPUT.value)[0] + ".md", "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    app.run(main)
