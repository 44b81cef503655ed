"""The input-work benchmark's table, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table


def table(result: dict) -> str:
    """Per task and process count P: the examples each process read per step and its milliseconds per batch (the
    range over the P processes where they differ)."""

    def span(values, form):
        low, high = form.format(min(values)), form.format(max(values))
        return low if low == high else f"{low}–{high}"

    groups: dict[tuple[str, int], list[dict]] = {}
    for row in result["processes"]:
        groups.setdefault((row["task"], row["processes"]), []).append(row)
    rows = [
        [
            task,
            str(count),
            span([r["examples_per_step"] for r in group], "{:g}"),
            span([1e3 * r["seconds"] for r in group], "{:.1f}"),
        ]
        for (task, count), group in groups.items()
    ]
    return markdown_table(["task", "P", "examples read per process per step", "ms per batch per process"], rows)
