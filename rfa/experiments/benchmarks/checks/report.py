"""The run-time checks benchmark's table, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table


def table(data: dict) -> str:
    """Each workload's median without and with its checks, and their ratio."""
    rows = [
        [name, f"{1e3 * t['without']:.2f}", f"{1e3 * t['with']:.2f}", f"{t['with'] / t['without']:.3f}"]
        for name, t in data["seconds"].items()
    ]
    return markdown_table(["workload", "without checks (ms)", "with checks (ms)", "ratio"], rows)
