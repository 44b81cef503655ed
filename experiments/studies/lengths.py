"""Length generalization: each attention kind with each positional encoding, evaluated beyond its training lengths.

  python -m experiments.studies.lengths --config configs/length_generalization.py --workdir DIR

The work is in :mod:`experiments.studies.length_generalization`; this module is its command line. Writes
``--output`` (JSON; default ``<workdir>/length_generalization.json``) and the table beside it (``.md``).
"""

from __future__ import annotations

from absl import flags
from ml_collections import config_flags

from experiments.cli import run_main, run_training, shipped_config
from experiments.report import output_path, write_report
from experiments.studies.length_generalization import run, table

_CONFIG = config_flags.DEFINE_config_file(
    "config", shipped_config("length_generalization.py"), "Which task, kinds, encodings and seeds."
)
_WORKDIR = flags.DEFINE_string("workdir", "workdir/length", "Parent of the per-setting training workdirs.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON of the results (.md beside); default <workdir>/length_generalization.json."
)


def main(argv):
    del argv
    rows = run_training(run, _CONFIG.value, _WORKDIR.value)
    text = table(rows)
    print(text)
    write_report(output_path(_OUTPUT.value, _WORKDIR.value, "length_generalization.json"), rows, text)


if __name__ == "__main__":
    run_main(main)
