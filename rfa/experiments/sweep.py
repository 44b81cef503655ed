"""Runs a sweep from a config (kernel MSE, attention error, estimator fit): tables, figures, report.

Run:
  rfa sweep --config performer_fig2 --workdir workdir/performer_fig2
  rfa sweep --config performer_fig2:quick --config.repetitions=500 --workdir /tmp/fig2

The workdir receives ``config.json``, ``cells/`` (one JSON per finished cell, written atomically),
``results.csv`` and ``results.json`` (every cell), PNG figures and ``report.md``. Running again on
the same workdir resumes: finished cells are read back, not recomputed. A workdir holding a
different config is refused and left untouched. Modules in ``config.modules`` (your estimators or
reproductions) are imported from the current directory.
"""

from __future__ import annotations

from absl import app, flags
from ml_collections import config_flags

from rfa.experiments.common.cli import run_main
from rfa.experiments.sweeps import run  # the shipped kinds and reproductions, registered

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Config: a shipped one by name (performer_fig2:quick) or a file (my_sweep.py:quick)."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for the results (created; re-running resumes).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CONFIG.value is None or not _WORKDIR.value:
        raise app.UsageError("both --config and --workdir are required.")
    outputs = run(_CONFIG.value, _WORKDIR.value)  # a bad config, or a workdir of another: one line (run_main)
    print(f"Report:  {outputs.report}\nResults: {outputs.results}")
    print("Figures: " + ", ".join(outputs.figures))


if __name__ == "__main__":
    run_main(main)
