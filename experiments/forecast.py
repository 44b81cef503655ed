"""The forecasting comparison: each attention kind against seasonal-naive, and step time against the lookback.

  python -m experiments.forecast --config configs/forecast.py --workdir workdir/forecast

The work is in :mod:`experiments.forecasting`; this module is its command line. Writes ``--output`` (JSON),
the table beside it (``.md``) and the step-time figure (``.png``).
"""

from __future__ import annotations

import os

from absl import flags
from ml_collections import config_flags

from experiments import run_main, run_training
from experiments.benchmarking import environment
from experiments.forecasting import plot, run, table
from experiments.tables import write_json

_CONFIG = config_flags.DEFINE_config_file("config", "configs/forecast.py", "Which task, kinds and lookbacks.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/forecast", "Parent of the per-attention training workdirs.")
_OUTPUT = flags.DEFINE_string("output", "results/forecast_cpu.json", "JSON of the results ('' for none).")


def main(argv):
    del argv
    results = run_training(run, _CONFIG.value, _WORKDIR.value)
    results["environment"] = environment()
    text = table(results)
    print(text)
    for kind, value in results["slopes"].items():
        print(f"step time against lookback, {kind}: slope {value}")
    write_json(_OUTPUT.value, results)
    if _OUTPUT.value:
        stem = os.path.splitext(_OUTPUT.value)[0]
        with open(stem + ".md", "w") as f:
            f.write(text + "\n")
        if results["timing"]:
            plot(results, stem + ".png")


if __name__ == "__main__":
    run_main(main)
