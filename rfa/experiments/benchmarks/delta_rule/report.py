"""The delta-rule benchmark's table and figure, each from its JSON alone (no JAX, no flags): the benchmark prints
them, and ``rfa tables`` renders them again for ``docs/results/benchmarks.md``."""

from __future__ import annotations

from matplotlib.figure import Figure

from rfa.experiments.common.report import loglog_figure, markdown_table

CASES = ("delta chunked", "kda chunked", "delta recurrent", "gla chunked", "gated causal", "exact")
"""The cases of ``rfa benchmark delta_rule``, in the order of its table's columns."""


RATIOS = {  # name: (numerator, denominator, target or None)
    "delta_over_gla": ("delta chunked", "gla chunked", None),
    "gla_over_gated_causal": ("gla chunked", "gated causal", 2.0),
    "kda_over_delta": ("kda chunked", "delta chunked", 2.0),
}
"""The ratios of ``rfa benchmark delta_rule``'s cases that its table gives at every length, with their targets."""


def ratio(row: dict, name: str) -> float:
    """One ratio of :data:`RATIOS` in one length's row of ``rfa benchmark delta_rule``'s results."""
    top, bottom, _ = RATIOS[name]
    return row[top]["median_ms"] / row[bottom]["median_ms"]


def table(results: dict) -> str:
    """``rfa benchmark delta_rule``'s JSON: each case's median time and the ratios per length, the log-log slopes,
    and each targeted ratio at the longest length against its target."""
    rows = results["results"]

    def milliseconds(row, name):
        return f"{row[name]['median_ms']:.1f}" if name in row else "-"

    text = markdown_table(
        [
            "L",
            *(f"{case} (ms)" for case in CASES),
            *(f"{top} / {bottom}" for top, bottom, _ in RATIOS.values()),
        ],
        [
            [
                str(row["length"]),
                *(milliseconds(row, case) for case in CASES),
                *(f"{ratio(row, name):.2f}" for name in RATIOS),
            ]
            for row in rows
        ],
    )
    text += "\n\nlog-log slope of time against L: " + ", ".join(
        f"{case} {s:.2f}" for case, s in results["slopes"].items() if s is not None
    )
    longest = rows[-1]
    for name, (top, bottom, target) in RATIOS.items():
        if target is not None:
            value = ratio(longest, name)
            verdict = "met" if value <= target else f"NOT met, by {value / target:.2f}x"
            text += f"\n\n{top} / {bottom} at L = {longest['length']}: {value:.2f} (target <= {target:g}: {verdict})."
    return text


LABELS = {  # each case of `rfa benchmark delta_rule` as the kind it runs, in its order
    "delta chunked": "deltanet (chunked)",
    "kda chunked": "kda (chunked)",
    "delta recurrent": "deltanet (recurrent)",
    "gla chunked": "gla (chunked)",
    "gated causal": "positive (gated, causal)",
    "exact": "exact",
}


def figure(results: dict, path: str) -> Figure:
    """``rfa benchmark delta_rule``'s JSON: forward + backward time against L, one series per case."""
    rows, config = results["results"], results["config"]
    curves = {
        label: ([r["length"] for r in rows if case in r], [r[case]["median_ms"] for r in rows if case in r])
        for case, label in LABELS.items()
        if any(case in r for r in rows)
    }
    title = f"causal attention, [{config['batch']}, L, {config['heads']}, {config['head_dim']}], forward + backward"
    return loglog_figure(curves, path, xlabel="L", ylabel="forward + backward (ms)", title=title)
