"""The forecasting comparison: each attention kind against seasonal-naive, and step time against the lookback.

  python -m experiments.studies.forecast --config configs/forecast.py --workdir workdir/forecast

The work is in :mod:`experiments.studies.forecasting`; this module is its command line. Writes ``--output`` (JSON),
the table beside it (``.md``) and the step-time figure (``.png``).
"""

from __future__ import annotations

from absl import flags
from ml_collections import config_flags

from experiments.benchmarks.common import environment
from experiments.cli import run_main, run_training, shipped_config
from experiments.report import output_path, write_report
from experiments.studies.forecasting import plot, run, table

_CONFIG = config_flags.DEFINE_config_file("config", shipped_config("forecast.py"), "Which task, kinds and lookbacks.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/forecast", "Parent of the per-attention training workdirs.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON of the results (table .md and figure .png beside); default <workdir>/forecast.json."
)


def main(argv):
    del argv
    results = run_training(run, _CONFIG.value, _WORKDIR.value)
    results["environment"] = environment()
    text = table(results)
    print(text)
    for kind, value in results["slopes"].items():
        print(f"step time against lookback, {kind}: slope {value}")
    write_report(
        output_path(_OUTPUT.value, _WORKDIR.value, "forecast.json"),
        results,
        text,
        (lambda path: plot(results, path)) if results["timing"] else None,
    )


if __name__ == "__main__":
    run_main(main)
