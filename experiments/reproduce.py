"""The main job: runs every reproduction (quick variants by default) and writes an index report.

Run: ``python -m experiments.reproduce --workdir workdir/reproduce`` (``make reproduce``);
``--variant=full`` runs the full sweeps. Each reproduction gets ``<workdir>/<name>/`` with its own
``report.md``, ``results.csv`` and figures (see ``experiments.mse``); ``<workdir>/report.md``
links them. Re-running resumes every sweep from its workdir.
"""

from __future__ import annotations

import importlib
import os

from absl import app, flags

from experiments import reproductions, runner, sweep

REPRODUCTIONS = tuple(reproductions.ANALYSES)  # each has configs/<name>.py

_WORKDIR = flags.DEFINE_string("workdir", "workdir/reproduce", "Parent directory of the reproductions' workdirs.")
_VARIANT = flags.DEFINE_string("variant", "quick", "Config variant to run: 'quick' (minutes) or 'full'.")
_ONLY = flags.DEFINE_list("only", list(REPRODUCTIONS), "Reproductions to run (config names under configs/).")


def run_all(names, variant: str, workdir: str, *, progress: bool = True) -> str:
    """Runs ``configs/<name>.py:<variant>`` into ``<workdir>/<variant>/<name>``; returns the index path."""
    lines = [f"# rfa reproductions ({variant} variants)", ""]
    for name in names:
        config = importlib.import_module(f"configs.{name}").get_config(variant)
        outputs = runner.run(config, os.path.join(workdir, variant, name), progress=progress)
        figures = ", ".join(f"[{os.path.basename(f)}]({name}/{os.path.basename(f)})" for f in outputs.figures)
        lines.append(f"- **{name}**: [report]({name}/report.md), [results.csv]({name}/results.csv); figures: {figures}")
        print(f"{name}: {outputs.report}")
    index = os.path.join(workdir, variant, "report.md")
    sweep.write_atomic(index, "\n".join(lines) + "\n")
    return index


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    unknown = sorted(set(_ONLY.value) - set(REPRODUCTIONS))
    if unknown:
        raise app.UsageError(f"unknown reproductions {unknown}; choose from {list(REPRODUCTIONS)}.")
    index = run_all(_ONLY.value, _VARIANT.value, _WORKDIR.value)
    print(f"\nIndex of the reports and figures: {index}")


if __name__ == "__main__":
    app.run(main)
