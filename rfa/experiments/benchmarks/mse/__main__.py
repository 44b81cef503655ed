from __future__ import annotations

import json
import os
import platform
import tempfile
import time

import jax
from absl import flags

from rfa.configs.sweeps import performer_fig2
from rfa.experiments import sweeps
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.benchmarks.mse import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import output_path, write_json

_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_mse.json.")
_WORKDIR = flags.DEFINE_string(
    "workdir", "workdir/benchmarks", "Where the JSON (and figure) go unless --output is given."
)
_VARIANT = flags.DEFINE_string("variant", "", "Config variant of performer_fig2 ('' = the full sweep).")


def main(argv):
    del argv
    config = performer_fig2.get_config(_VARIANT.value)
    with tempfile.TemporaryDirectory() as workdir:
        began = time.perf_counter()
        outputs = sweeps.run(config, workdir)
        seconds = time.perf_counter() - began
    evaluations = sum(r["feature_evaluations"] for r in outputs.records)
    summary = {
        "sweep": {
            "angles": len(config.geometry.angles),
            "lengths": len(config.geometry.norms),
            "estimators": list(config.estimators),
            "m": config.num_features[0],
            "d": config.dim,
            "repetitions": config.repetitions,
            "cells": len(outputs.records),
        },
        "wall_seconds": seconds,
        "cell_seconds": sum(r["seconds"] for r in outputs.records),
        "feature_evaluations": evaluations,
        "feature_evaluations_per_second": evaluations / seconds,
        "device": str(jax.devices()[0].device_kind),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "jax": jax.__version__,
    }
    print(json.dumps(summary, indent=2))
    print(f"\nFull performer_fig2 sweep: {seconds:.1f} s wall, {evaluations / seconds:.3g} feature evaluations/s.")
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_mse.json")
    write_json(output, summary)
    print(f"wrote {output}")
    warn_against_committed(output, summary)


if __name__ == "__main__":
    run_main(main)
