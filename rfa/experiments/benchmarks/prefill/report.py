"""The prefill benchmark's table, from its JSON alone (no JAX, no flags): the benchmark prints it, and
``rfa tables`` renders it again for ``docs/results/benchmarks.md``."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table

DECAYS = ("token", "channel")
"""One decay per token (Gated DeltaNet) and one per key channel (KDA)."""


def crossover(results: dict, decay: str) -> int | None:
    """The longest length up to which the recurrent form is at most as slow as the chunked one at every length
    measured (None: not even at the shortest)."""
    longest = None
    for row in results["results"]:
        if row[decay]["recurrent_ms"] > row[decay]["chunked_ms"]:
            break
        longest = row["length"]
    return longest


def table(results: dict) -> str:
    """``rfa benchmark prefill``'s JSON: per length, each decay's two times and their ratio, then the crossovers."""
    header = ["L"] + [f"{decay}: {case}" for decay in DECAYS for case in ("chunked (ms)", "recurrent (ms)", "ratio")]
    rows = [
        [str(r["length"])]
        + [
            cell
            for decay in DECAYS
            for cell in (
                f"{r[decay]['chunked_ms']:.3f}",
                f"{r[decay]['recurrent_ms']:.3f}",
                f"{r[decay]['recurrent_ms'] / r[decay]['chunked_ms']:.2f}",
            )
        ]
        for r in results["results"]
    ]
    text = markdown_table(header, rows)
    longest = results["results"][-1]["length"]
    for decay in DECAYS:
        up_to = crossover(results, decay)
        where = "at every length measured" if up_to == longest else f"up to L = {up_to}"
        text += f"\n\n{decay}: the recurrent form is at most as slow as the chunked one {where}."
    return text
