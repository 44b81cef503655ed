"""The length_generalization study's table, from its JSON alone (no JAX): the study writes it, and ``rfa tables``
renders it again for the results pages."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.spread import Spread, metric, table_verdicts

METRICS = ("accuracy", "sequence_accuracy")


def table(results: dict) -> str:
    """Markdown of :func:`run`'s rows and floors: each setting's accuracies at the training and the longer lengths,
    and its longer accuracy against the first encoding of its kind (paired over the seeds, 95% interval, the
    table's Holm-corrected verdict: :func:`rfa.experiments.common.spread.table_verdicts`); then the floors' rows."""
    rows = results["rows"]
    first = {}
    for row in rows:
        first.setdefault(row["attention"], row)
    compared = table_verdicts(
        rows,
        lambda row: None if first[row["attention"]] is row else first[row["attention"]],
        lambda row: {run["seed"]: run["accuracy"] for run in row["longer_runs"]},
        higher_is_better=True,
    )
    lines = []
    for row, verdict in zip(rows, compared, strict=True):
        lines.append(
            [
                row["attention"],
                row["positional"],
                str(len(row["seeds"])),
                *(metric(row, name).cell("{:.3f}") for name in METRICS),
                *(Spread(**row["longer"][name]).cell("{:.3f}") for name in METRICS),
                "-" if verdict is None else f"{verdict[0].cell('{:.3f}')} ({first[row['attention']]['positional']})",
                "-" if verdict is None else verdict[1],
            ]
        )
    for rule, values in results["floors"].items():
        lines.append([f"floor: {rule}", "-", "-", "-", "-", *(f"{values[name]:.3f}" for name in METRICS), "-", "-"])
    header = [
        "attention",
        "positions",
        "seeds",
        "accuracy (train lengths)",
        "sequence accuracy (train lengths)",
        "accuracy (longer)",
        "sequence accuracy (longer)",
        "Δ longer accuracy vs first [95% CI]",
        "verdict",
    ]
    return markdown_table(header, lines)
