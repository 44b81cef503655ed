"""Associative recall against recurrent state size: every attention kind on MQAR, over seeds and feature counts.

  python -m experiments.studies.recall --config configs/recall.py --workdir workdir/recall

The work is in :mod:`experiments.studies.associative_recall`; this module is its command line. Writes ``--output``
(JSON; default ``<workdir>/recall.json``), the table beside it (``.md``) and the figure (``.png``).
"""

from __future__ import annotations

from absl import flags
from ml_collections import config_flags

from experiments.cli import run_main, run_training, shipped_config
from experiments.report import output_path, write_report
from experiments.studies.associative_recall import SMOKE_TEST, plot, run, table

_CONFIG = config_flags.DEFINE_config_file("config", shipped_config("recall.py"), "Which kinds, feature counts, seeds.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/recall", "Parent of the per-setting training workdirs.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON of the results (.md and .png beside); default <workdir>/recall.json."
)


def main(argv):
    del argv
    rows = run_training(run, _CONFIG.value, _WORKDIR.value)
    smoke = _CONFIG.value.smoke_test
    text = (SMOKE_TEST + "\n\n" if smoke else "") + table(rows, verdicts=not smoke)
    print(text)
    write_report(output_path(_OUTPUT.value, _WORKDIR.value, "recall.json"), rows, text, lambda path: plot(rows, path))


if __name__ == "__main__":
    run_main(main)
