"""Estimators inside real models: each estimator swapped into trained and untrained models, against softmax.

  python -m experiments.studies.estimators --config configs/estimators_in_models.py --workdir DIR

The work is in :mod:`experiments.studies.estimators_in_models`; this module is its command line. Writes
``--output`` (JSON; default ``<workdir>/estimators_in_models.json``), the table beside it (``.md``) and the figure
(``.png``); then the q/k-scale sweep (:mod:`experiments.studies.qk_scale`) beside them, as ``<output>_qk_scale.json``,
``.md`` and ``.png``.
"""

from __future__ import annotations

import os

from absl import flags
from ml_collections import config_flags

from experiments.cli import run_main, run_training, shipped_config
from experiments.report import output_path, write_report
from experiments.studies import qk_scale
from experiments.studies.estimators_in_models import run
from experiments.studies.estimators_in_models_report import plot, table

_CONFIG = config_flags.DEFINE_config_file(
    "config", shipped_config("estimators_in_models.py"), "Which models, estimators, m and seeds."
)
_WORKDIR = flags.DEFINE_string("workdir", "workdir/estimators_in_models", "Parent of the training workdirs.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON of the results (.md and .png beside); default <workdir>/estimators_in_models.json."
)


def main(argv):
    del argv
    rows = run_training(run, _CONFIG.value, _WORKDIR.value)
    text = table(rows)
    print(text)
    output = output_path(_OUTPUT.value, _WORKDIR.value, "estimators_in_models.json")
    write_report(output, rows, text, lambda path: plot(rows, path))
    scale_rows = run_training(qk_scale.run, _CONFIG.value, _WORKDIR.value)
    scale_text = qk_scale.table(scale_rows)
    print(scale_text)
    scale_output = os.path.splitext(output)[0] + "_qk_scale.json"
    write_report(scale_output, scale_rows, scale_text, lambda path: qk_scale.plot(scale_rows, path))


if __name__ == "__main__":
    run_main(main)
