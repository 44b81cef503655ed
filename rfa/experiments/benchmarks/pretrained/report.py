"""The pretrained families' benchmark: its table and figure, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.styles import COLORS, legend_outside

LIBRARIES = ("rfa", "transformers")
LOOKS = ({"linestyle": "-", "marker": "o"}, {"linestyle": "--", "marker": "s", "markerfacecolor": "none"})
"""Each library's series: rfa's solid with filled circles, transformers' dashed with hollow squares."""


def _rate(row: dict, library: str, what: str) -> str:
    value = row.get(library, {}).get(f"{what}_tokens_per_s")
    return "-" if value is None else f"{value:,.0f}"


def table(results: dict) -> str:
    """Per family, batch and prompt length: each library's prefill and decoding tokens per second, and rfa's
    decoding throughput over transformers'."""
    header = ["family", "B", "P", "rfa prefill (tok/s)", "rfa decode (tok/s)"]
    header += ["transformers prefill (tok/s)", "transformers decode (tok/s)", "decode: rfa / transformers"]
    rows = []
    for row in results["results"]:
        ours, theirs = (row.get(library, {}).get("decode_tokens_per_s") for library in LIBRARIES)
        ratio = f"{ours / theirs:.1f}x" if ours and theirs else "-"
        rows.append(
            [
                row["family"],
                str(row["batch"]),
                str(row["prompt"]),
                *(_rate(row, library, what) for library in LIBRARIES for what in ("prefill", "decode")),
                ratio,
            ]
        )
    return markdown_table(header, rows)


def figure(results: dict, path: str) -> Figure:
    """Prefill and decoding tokens per second against the prompt's length at batch 1, one color per family, each
    library in its :data:`LOOKS`."""
    figure = Figure(figsize=(10, 4.2))
    axes = figure.subplots(1, 2)
    families = list(dict.fromkeys(r["family"] for r in results["results"]))
    colors = dict(zip(families, COLORS, strict=False))
    for axis, what in zip(axes, ("prefill", "decode"), strict=True):
        for family in families:
            rows = [r for r in results["results"] if r["family"] == family and r["batch"] == 1]
            for library, style in zip(LIBRARIES, LOOKS, strict=True):
                points = [
                    (r["prompt"], r[library][f"{what}_tokens_per_s"])
                    for r in rows
                    if r.get(library, {}).get(f"{what}_tokens_per_s") is not None
                ]
                if points:
                    xs, ys = zip(*points, strict=True)
                    axis.plot(xs, ys, color=colors[family], label=f"{family} ({library})", **style)
        axis.set(xscale="log", yscale="log", xlabel="prompt length P", ylabel=f"{what} tokens / s, batch 1")
        lengths = sorted({r["prompt"] for r in results["results"]})
        axis.set_xticks(lengths, [str(p) for p in lengths])
        axis.xaxis.set_minor_locator(NullLocator())
        axis.grid(alpha=0.3, which="both")
    legend_outside(axes[1])
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure
