"""The precision benchmark's table, from its JSON alone (no JAX, no flags): the benchmark prints it, and
``rfa tables`` renders it again for ``docs/results/precision.md``."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table

KINDS = ("deltanet", "gated_deltanet", "kda", "kernelized", "gla")
"""The kinds of ``rfa benchmark precision``: the delta rule with no decay, one decay per token, one per key channel;
kernelized attention with positive features and one decay per token, and with elu+1 and one per feature (GLA)."""


def table(results: dict) -> str:
    """``rfa benchmark precision``'s JSON: per kind and length, both times, their ratio and the errors."""
    rows = [
        [
            row["kind"],
            str(row["length"]),
            f"{row['float32']['median_ms']:.1f}",
            f"{row['bfloat16']['median_ms']:.1f}",
            f"{row['bfloat16']['median_ms'] / row['float32']['median_ms']:.2f}",
            f"{100 * row['output_error']:.2f}",
            f"{100 * row['state_error']:.2f}",
            f"{100 * row['decode_error']['float32']:.2f}",
            f"{100 * row['decode_error']['bfloat16']:.1f}",
        ]
        for row in results["results"]
    ]
    header = [
        "kind",
        "L",
        "float32 (ms)",
        "bfloat16 (ms)",
        "bfloat16 / float32",
        "output error (%)",
        "state error (%)",
        "decode, float32 state (%)",
        "decode, bfloat16 state (%)",
    ]
    return markdown_table(header, rows)
