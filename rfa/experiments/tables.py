"""The committed comparison tables of ``results/``, each re-rendered from its JSON by the study that wrote it.

  rfa tables           # rewrite results/<name>.{md,png} and the pages' marked tables from the JSON
  rfa tables --check   # exit 1 naming every file whose tables are not their JSON's

A study writes its JSON and its table together; when the table's rule changes (the verdict rule of
:mod:`rfa.experiments.common.spread`, a column), the tables are rendered again from the stored per-seed values, with no
retraining; so are the figures that need nothing but the JSON (:data:`FIGURES`). The results pages
(``docs/results``) quote them between ``<!-- table: NAME -->`` and ``<!-- /table -->`` markers, which this command
rewrites too, and a test holds every page to them. The cost columns of the sort and recall tables are not their
runs' step times but those of ``rfa benchmark train_step`` (:data:`STEP_TIMES`), which times every kind of a config
side by side in one process.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable

from absl import flags

from rfa.experiments.benchmarks.attention import report as attention
from rfa.experiments.benchmarks.checks import report as checks
from rfa.experiments.benchmarks.decoding import report as decoding
from rfa.experiments.benchmarks.delta_rule import report as delta_rule
from rfa.experiments.benchmarks.flax_decoding import report as flax_decoding
from rfa.experiments.benchmarks.input_work import report as input_work
from rfa.experiments.benchmarks.precision import report as precision
from rfa.experiments.benchmarks.prefill import report as prefill
from rfa.experiments.benchmarks.pretrained import report as pretrained
from rfa.experiments.benchmarks.relative import report as relative
from rfa.experiments.benchmarks.scaling import report as scaling
from rfa.experiments.benchmarks.train_step import report as train_step
from rfa.experiments.common import report
from rfa.experiments.common.cli import run_main
from rfa.experiments.studies.distillation import report as distillation
from rfa.experiments.studies.estimators_in_models import qk_scale
from rfa.experiments.studies.estimators_in_models import report as estimators_in_models_report
from rfa.experiments.studies.forecasting import report as forecasting
from rfa.experiments.studies.length_generalization import report as length_generalization
from rfa.experiments.studies.recall import report as recall

RESULTS = report.CHECKOUT_RESULTS


def _distillation(summary: dict) -> str:
    return distillation.table(distillation.over_seeds(summary["per_seed"]))


def _single_runs(rows: list[dict]) -> str:
    """One training run per row (seed 0, before the seeded protocol): the final step's validation metrics and the
    step's cost, as the LRA cost table shows them."""
    header = ["task", "attention", "m", "accuracy", "sequence accuracy", "perplexity", "step (ms)", "tokens/s"]
    header.append("step memory (MiB)")
    lines = [
        [
            row["task"],
            row["attention"],
            "-" if row["num_features"] is None else str(row["num_features"]),
            f"{row['eval']['accuracy']:.3f}",
            *(
                report.number(row["eval"].get(name), 1, form)
                for name, form in (("sequence_accuracy", "{:.3f}"), ("perplexity", "{:.2f}"))
            ),
            report.number(row["step_time_s"], 1e3, "{:.1f}"),
            report.number(row["tokens_per_s"], 1e-3, "{:.0f}k"),
            report.number(row["step_memory_bytes"], 2**-20, "{:.1f}"),
        ]
        for row in rows
    ]
    return report.markdown_table(header, lines)


TRAIN_STEP = "benchmark_train_step_cpu"
"""The JSON of ``rfa benchmark train_step``: every kind's training step of a table's config, timed side by side."""

STEP_TIMES: dict[str, str] = {
    "train_cpu_sort_seeded": "compare_kernels:sort",
    "recall_cpu": "recall",
    "recall_pairs4_l64_cpu": "recall:pairs4_l64",
    "recall_pairs4_l128_cpu": "recall:pairs4_l128",
}
"""``results/<name>.json`` → the study config under which ``results/<TRAIN_STEP>.json`` timed its settings: these
tables' cost columns are that benchmark's step times (its ``configs[<config>]``), not their runs' own, which were
measured at different times beside other jobs (and stay in the runs' JSON)."""

TABLES: dict[str, Callable[[object], str]] = {
    "train_cpu_sort_seeded": report.training_table,
    "train_cpu_listops_cpu_seeded": report.training_table,
    "train_cpu_python_source_seeded": report.training_table,
    "train_cpu_vision_seeded": report.training_table,
    "recall_cpu": recall.table,
    "recall_pairs8_exact_cpu": recall.table,
    "recall_pairs4_l64_cpu": recall.table,
    "recall_pairs4_l128_cpu": recall.table,
    "forecast_co2_cpu": forecasting.table,
    "forecast_sunspots_cpu": forecasting.table,
    "length_generalization_cpu": length_generalization.table,
    "estimators_in_models_cpu": estimators_in_models_report.table,
    "distill_cpu": _distillation,
    "train_cpu_lra": _single_runs,
    "benchmark_decoding_cpu": decoding.table,
    "benchmark_attention_cpu": lambda result: attention.main_table(result["results"]),
    "benchmark_attention_gated_cpu_1core": lambda result: attention.main_table(result["results"]),
    "benchmark_attention_gated_cpu": lambda result: attention.main_table(result["results"]),
    "benchmark_attention_estimators_cpu": lambda result: attention.estimators_table(result["estimators"]),
    "benchmark_attention_gpu": lambda result: attention.main_table(result["results"]),
    "benchmark_attention_estimators_gpu": lambda result: attention.estimators_table(result["estimators"]),
    "benchmark_delta_rule_cpu": delta_rule.table,
    "benchmark_delta_rule_gpu": delta_rule.table,
    "benchmark_precision_cpu": precision.table,
    "benchmark_prefill_cpu": prefill.table,
    "benchmark_pretrained_cpu": pretrained.table,
    "benchmark_scaling_cpu": lambda result: scaling.by_length(result["results"]),
    "benchmark_sequence_parallel_cpu": lambda result: scaling.sequence_parallel(result["results"]),
    "benchmark_relative_cpu": relative.table,
    "benchmark_flax_decoding_cpu": flax_decoding.table,
    "benchmark_checks_cpu": checks.table,
    "benchmark_input_work_cpu": input_work.table,
    TRAIN_STEP: train_step.table,
}
"""``results/<name>.json`` → the function that renders its table (the study's own), written to ``<name>.md``."""

PARTS: dict[str, tuple[str, Callable[[object], str]]] = {
    "estimators_in_models_cpu:summary": ("estimators_in_models_cpu", estimators_in_models_report.summary),
    "estimators_in_models_cpu_qk_scale:summary": ("estimators_in_models_cpu_qk_scale", qk_scale.summary),
    "estimators_in_models_cpu:verdicts": (
        "estimators_in_models_cpu",
        lambda rows: "\n".join(estimators_in_models_report.verdicts(rows)),
    ),
}
"""Parts of a JSON's results that a page quotes on their own: ``"<name>:<part>"`` → (name, renderer)."""

FIGURES: dict[str, Callable[[object, str], None]] = {
    **{name: report.differences_figure for name, table in TABLES.items() if table is report.training_table},
    "benchmark_delta_rule_cpu": delta_rule.figure,
    "benchmark_delta_rule_gpu": delta_rule.figure,
    "benchmark_flax_decoding_cpu": flax_decoding.figure,
    "benchmark_scaling_cpu": scaling.figure,
    "benchmark_pretrained_cpu": pretrained.figure,
    "recall_cpu": recall.plot,
    "recall_pairs8_exact_cpu": recall.plot,
    "recall_pairs4_l64_cpu": recall.plot,
    "recall_pairs4_l128_cpu": recall.plot,
    "estimators_in_models_cpu": estimators_in_models_report.plot,
    "estimators_in_models_cpu_qk_scale": qk_scale.plot,
}
"""``results/<name>.json`` → the function that draws ``results/<name>.png`` from it alone."""

DOCS = os.path.join(os.path.dirname(RESULTS), "docs", "results")
# The body (never a closing marker) and its last newline are optional: an empty section is filled too.
SECTION = re.compile(
    r"(<!-- table: (?P<key>[\w:]+) -->\n)(?:(?P<body>(?:(?!<!-- /table -->).)*?)\n)?(<!-- /table -->)", re.DOTALL
)


def render(key: str, results_dir: str = RESULTS) -> str:
    """The table ``key`` — a name of :data:`TABLES` or :data:`PARTS` — from ``results/<name>.json`` under today's
    rule.

    Example:
      >>> render("recall_cpu").splitlines()[0]  # doctest: +ELLIPSIS
      '| attention | m | state per layer (KiB) | seeds | test accuracy | Δ vs exact [95% CI] | verdict |'
    """
    name, renderer = PARTS.get(key, (key, TABLES.get(key)))
    if renderer is None:
        raise KeyError(f"no results table {key!r}; known: {sorted(TABLES) + sorted(PARTS)}.")
    with open(os.path.join(results_dir, name + ".json")) as f:
        results = json.load(f)
    if key in STEP_TIMES:
        return renderer(results, step_times=step_times(key, results_dir))
    return renderer(results)


def step_times(name: str, results_dir: str = RESULTS) -> dict:
    """The entry of ``results/<TRAIN_STEP>.json`` for the config of the table ``name`` (:data:`STEP_TIMES`)."""
    with open(os.path.join(results_dir, TRAIN_STEP + ".json")) as f:
        configs = json.load(f)["configs"]
    if STEP_TIMES[name] not in configs:
        raise KeyError(f"{TRAIN_STEP}.json has no config {STEP_TIMES[name]!r} (the step times of {name}).")
    return configs[STEP_TIMES[name]]


def page_sections(text: str) -> list[tuple[str, str]]:
    r"""The ``(key, body)`` of every section of a page between ``<!-- table: KEY -->`` and ``<!-- /table -->``
    (markers the site does not show).

    Example:
      >>> page_sections("x\n<!-- table: recall_cpu -->\n| a |\n<!-- /table -->\ny")
      [('recall_cpu', '| a |')]
      >>> page_sections("<!-- table: a -->\n<!-- /table -->\n<!-- table: b -->\n| b |\n<!-- /table -->")
      [('a', ''), ('b', '| b |')]
    """
    return [(match["key"], match["body"] or "") for match in SECTION.finditer(text)]


def synced(text: str, results_dir: str = RESULTS) -> str:
    """``text`` with every marked section replaced by its table rendered anew."""
    return SECTION.sub(lambda m: m.group(1) + render(m["key"], results_dir) + "\n" + m.group(4), text)


_CHECK = flags.DEFINE_bool("check", False, "Only compare: exit 1 if a committed table differs from its JSON.")


def main(argv):
    del argv
    for name, plot in FIGURES.items():
        if not _CHECK.value:
            with open(os.path.join(RESULTS, name + ".json")) as f:
                plot(json.load(f), os.path.join(RESULTS, name + ".png"))
    targets = [(os.path.join(RESULTS, name + ".md"), lambda _, name=name: render(name) + "\n") for name in TABLES]
    targets += [(os.path.join(DOCS, page), synced) for page in sorted(os.listdir(DOCS)) if page.endswith(".md")]
    stale = []
    for path, make in targets:
        old = ""
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        new = make(old)
        if new == old:
            continue
        stale.append(path)
        if not _CHECK.value:
            with open(path, "w") as f:
                f.write(new)
        print(f"{'differs' if _CHECK.value else 'rewrote'}: {path}")
    if _CHECK.value and stale:
        sys.exit(1)


if __name__ == "__main__":
    run_main(main)
