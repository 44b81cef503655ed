"""Hedgehog attention distillation of a trained exact-attention model (see :mod:`experiments.studies.distillation`).

  python -m experiments.studies.distill --config configs/distill.py --workdir workdir/distill
  python -m experiments.studies.distill --config configs/distill.py:quick --workdir /tmp/distill

Trains (or reads back) the teacher, the distilled and fine-tuned student and the Hedgehog-from-scratch
baseline in the workdir, once per seed, prints the table and writes ``distill.json`` / ``distill.md`` there (and the
JSON to ``--output`` if given). A re-run resumes each run from what is saved.
"""

from __future__ import annotations

from absl import flags
from ml_collections import config_flags

from experiments.cli import run_main, run_training, shipped_config
from experiments.report import write_json
from experiments.spread import Spread
from experiments.studies.distillation import run, table

_CONFIG = config_flags.DEFINE_config_file("config", shipped_config("distill.py"), "Distillation config.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/distill", "Where the teacher, student and scratch runs go.")
_OUTPUT = flags.DEFINE_string("output", "", "Also write the JSON here (e.g. results/distill_cpu.json).")


def main(argv):
    del argv
    summary = run_training(run, _CONFIG.value, _WORKDIR.value)
    print(table(summary))
    first, last = (Spread(**summary["stage1_loss"][end]).cell("{:.3f}") for end in ("first", "last"))
    print(f"\nstage 1 attention cross-entropy: {first} -> {last}")
    if _OUTPUT.value:
        write_json(_OUTPUT.value, summary)


if __name__ == "__main__":
    run_main(main)
