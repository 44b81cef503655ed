"""The decoding benchmark's table, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table


def table(summary: dict) -> str:
    """The time per token of each kind at each position (µs), its last position's over its first (the stateful
    kinds), and the medians over the positions of checked over unchecked and of the kind over kernelized attention.
    """
    times, ratios = summary["seconds_per_token"], summary["ratios"]
    positions = sorted(next(iter(times.values())), key=int)
    header = ["kind", f"µs/token at {positions[0]}", *(f"at {p}" for p in positions[1:])]
    header += [f"{positions[-1]} vs {positions[0]}", "checks / unchecked", "/ kernelized"]
    rows = [
        [
            name,
            *(f"{1e6 * by_position[p]:.1f}" for p in positions),
            f"{ratios['last_vs_first'][name]:.2f}x" if name in ratios["last_vs_first"] else "-",
            f"{ratios['checks_over_unchecked'][name]:.2f}",
            f"{ratios['over_kernelized'][name]:.2f}x" if name in ratios["over_kernelized"] else "-",
        ]
        for name, by_position in times.items()
    ]
    return markdown_table(header, rows)
