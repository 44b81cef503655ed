"""Markdown tables and JSON summaries that the entry points print and write."""

from __future__ import annotations

import json
import os


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table, numbers right-aligned; cells are already formatted strings."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: str, data) -> None:
    """Writes ``data`` as indented JSON to ``path``, creating its directory (nothing if ``path`` is empty)."""
    if not path:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def _number(value: float | None, scale: float, form: str) -> str:
    """``value * scale`` formatted, or "-" for a value the run did not measure (resumed after its last step)."""
    return "-" if value is None else form.format(value * scale)


def training_table(results: list[dict]) -> str:
    """Markdown of training runs' ``results.json``: one row per run (``experiments.compare_kernels``).

    Accuracy is per token (seq2seq, lm) or per example (classification); sequence accuracy is
    the teacher-forced exact match of whole targets (seq2seq). An image model's architecture follows its task.
    """
    rows = []
    for r in results:
        rows.append([
            r["task"] + (f" ({r['architecture']})" if "architecture" in r else ""),
            r["attention"],
            "-" if r["num_features"] is None else str(r["num_features"]),
            f"{r['eval']['accuracy']:.3f}",
            _number(r["eval"].get("sequence_accuracy"), 1, "{:.3f}"),
            _number(r["eval"].get("perplexity"), 1, "{:.2f}"),
            _number(r["step_time_s"], 1e3, "{:.1f}"),
            _number(r["tokens_per_s"], 1e-3, "{:.0f}k"),
            _number(r["step_memory_bytes"], 2**-20, "{:.1f}"),
        ])  # fmt: skip
    header = [
        "task",
        "attention",
        "m",
        "accuracy",
        "sequence accuracy",
        "perplexity",
        "step (ms)",
        "tokens/s",
        "step memory (MiB)",
    ]
    return markdown_table(header, rows)
