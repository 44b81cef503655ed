"""Runs one sweep from its config into a workdir: cells, tables, figures and report.

``run(config, workdir)`` computes every cell of the sweep not already stored in the workdir (see
:class:`rfa.experiments.sweep_framework.cells.ResultStore`) with its experiment kind's measurement, then writes
``results.csv``/``results.json`` (every cell), the reproduction's PNG figures and ``report.md``, which opens
with the reproduction's verdict (:class:`rfa.experiments.common.report.Verdict`). ``rfa.experiments.sweep`` is its
command line. The shipped kinds are registered by importing :mod:`rfa.experiments.sweeps` (which re-exports
:func:`run`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import os
import time

import ml_collections
from tqdm import tqdm

from rfa.experiments.common.report import Verdict
from rfa.experiments.sweep_framework import registry
from rfa.experiments.sweep_framework.cells import ResultStore, cells
from rfa.experiments.sweep_framework.config_checks import check_config
from rfa.workdir import write_atomic


@dataclasses.dataclass(frozen=True)
class Outputs:
    """What a run left in its workdir, and its verdict (None: a sweep with no published comparison)."""

    report: str
    results: str
    figures: tuple[str, ...]
    records: list[dict]
    verdict: Verdict | None


def _write_tables(workdir: str, records: list[dict]) -> str:
    columns = list(dict.fromkeys(key for record in records for key in record))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    path = os.path.join(workdir, "results.csv")
    write_atomic(path, text.getvalue())
    write_atomic(os.path.join(workdir, "results.json"), json.dumps(records, indent=1) + "\n")
    return path


def _run_summary(config, records: list[dict], seconds: float) -> str:
    compute = sum(r["seconds"] for r in records)
    lines = [
        "## Run",
        f"{len(records)} cells; compute time of the cells {compute:.1f} s (this invocation took {seconds:.1f} s, "
        "including compilation and cells read back from an earlier run).",
    ]
    evaluations = sum(r.get("feature_evaluations", 0) for r in records)
    if evaluations and compute > 0:
        lines[-1] += f" Feature evaluations: {evaluations:.3g}, {evaluations / compute:.3g} per second of cell time."
    config_text = "\n".join(f"    {line}" for line in json.dumps(json.loads(config.to_json()), indent=2).splitlines())
    return "\n\n".join([*lines, "Config (also in `config.json`):", config_text])


def run(config: ml_collections.ConfigDict, workdir: str, *, progress: bool = True) -> Outputs:
    """Computes every cell of ``config``'s sweep not already in ``workdir``, then writes tables, figures, report.

    Args:
      config: a sweep config (``rfa.configs.common.sweep_config`` gives its fields), e.g. from ``rfa/configs/sweeps/``.
      workdir: output directory; created if missing.
      progress: show a progress bar over the cells.

    Returns:
      the paths written and the records of all cells.

    Example:
      >>> import os, tempfile
      >>> import rfa.experiments.sweeps  # the shipped kinds
      >>> from rfa.configs.sweeps import performer_fig2
      >>> outputs = run(performer_fig2.get_config("quick"), tempfile.mkdtemp(), progress=False)
      >>> os.path.basename(outputs.report)
      'report.md'
    """
    check_config(config)
    began = time.perf_counter()
    store = ResultStore(workdir, config)
    all_cells = cells(config)
    pending = sum(not store.done(cell) for cell in all_cells)
    kind = registry.experiment_kind(config.experiment)
    context = kind.context(config, workdir)  # inputs every group shares, made once
    with tqdm(total=len(all_cells), initial=len(all_cells) - pending, desc=config.name, disable=not progress) as bar:
        for _, group in itertools.groupby(all_cells, key=lambda cell: cell.group):
            group = list(group)
            if all(store.done(cell) for cell in group):
                continue
            for cell, record in kind.measure(config, group, context, store.done):
                store.save(cell, record)
                bar.update()
    records = [store.load(cell) for cell in all_cells]
    results_path = _write_tables(workdir, records)
    analysis = registry.analyze(config, records, workdir)
    title = [f"# {config.name}"]
    if analysis.verdict is not None:
        title.append(f"**{analysis.verdict.line(config.name)}**")
    title.append("Results: `results.csv` (one row per cell); figures beside this report.")
    summary = _run_summary(config, records, time.perf_counter() - began)
    report = "\n\n".join([*title, *analysis.sections, summary]) + "\n"
    report_path = os.path.join(workdir, "report.md")
    write_atomic(report_path, report)
    figures = tuple(sorted(os.path.join(workdir, f) for f in os.listdir(workdir) if f.endswith(".png")))
    return Outputs(report_path, results_path, figures, records, analysis.verdict)
