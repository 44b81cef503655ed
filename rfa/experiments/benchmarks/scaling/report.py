"""The scaling benchmark's tables and figure, each from its JSON alone (no JAX, no flags): the benchmark prints
them, and ``rfa tables`` renders them again for ``docs/results/benchmarks.md`` (the figure too)."""

from __future__ import annotations

from matplotlib.figure import Figure

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.styles import legend_outside, styles


def table(results: list[dict]) -> str:
    """One row per model, kind and length: the step time (or why it was skipped) and the peak memory."""
    header = ["model", "kind", "L", "step ms", "peak MiB"]
    rows = [
        [
            r["model"],
            r["kind"],
            str(r["length"]),
            f"{r['median_ms']:.1f}" if "median_ms" in r else r["skipped"],
            "-" if r["memory"] is None else f"{r['memory']['peak_bytes'] / 2**20:.1f}",
        ]
        for r in results
    ]
    return markdown_table(header, rows)


def by_length(results: list[dict]) -> str:
    """:func:`table` with one row per length: each (model, kind)'s step time, then its peak memory."""
    series = list(dict.fromkeys((r["model"], r["kind"]) for r in results))
    cells = {(r["model"], r["kind"], r["length"]): r for r in results}
    header = ["L", *(f"{m} {k} ms" for m, k in series), *(f"{m} {k} peak MiB" for m, k in series)]
    rows = []
    for length in dict.fromkeys(r["length"] for r in results):
        row = [cells.get((m, k, length)) for m, k in series]
        times = ["-" if r is None else f"{r['median_ms']:.1f}" if "median_ms" in r else "skipped" for r in row]
        peaks = ["-" if r is None or r["memory"] is None else f"{r['memory']['peak_bytes'] / 2**20:.0f}" for r in row]
        rows.append([str(length), *times, *peaks])
    return markdown_table(header, rows)


def sequence_parallel(results: list[dict]) -> str:
    """Per-device peak memory against the devices P splitting the sequence, one column per (model, kind)."""
    series = list(dict.fromkeys((r["model"], r["kind"]) for r in results))
    cells = {(r["model"], r["kind"], r["devices"]): r["memory"]["peak_bytes"] / 2**20 for r in results}
    devices = dict.fromkeys(r["devices"] for r in results)
    rows = [[str(p), *(f"{cells[(m, k, p)]:.0f}" for m, k in series)] for p in devices]
    return markdown_table(["P", *(f"{m} {k} MiB" for m, k in series)], rows)


def figure(data: dict, path: str) -> Figure:
    """``rfa benchmark scaling``'s JSON: training-step time (top) and peak memory (bottom) against L, one series per
    model and kind, in the kind's style; the decoder solid with filled markers, the encoder dashed with larger hollow
    ones, so that both show where their curves coincide."""
    results, summary = data["results"], data["summary"]
    pairs = list(dict.fromkeys((r["model"], r["kind"]) for r in results))
    look = styles(dict.fromkeys(kind for _, kind in pairs))
    figure = Figure(figsize=(7.5, 7.5))
    time_axis, memory_axis = figure.subplots(2, 1)
    for model, kind in pairs:
        rows = [r for r in results if (r["model"], r["kind"]) == (model, kind)]
        timed, sized = [r for r in rows if "median_ms" in r], [r for r in rows if r["memory"]]
        drawn = {**look[kind], "linestyle": "-" if model == "decoder" else "--"}
        if model != "decoder":  # a larger hollow ring: it shows around a decoder point it coincides with
            drawn |= {"markerfacecolor": "none", "markersize": 10}
        fit = summary[f"{model}/{kind}"]["time_slope"]
        label = f"{model} {kind}"
        time_axis.plot(
            [r["length"] for r in timed],
            [r["median_ms"] for r in timed],
            label=f"{label} (slope {fit:.2f})" if fit else label,
            **drawn,
        )
        memory_axis.plot(
            [r["length"] for r in sized], [r["memory"]["peak_bytes"] / 2**20 for r in sized], label=label, **drawn
        )
    for axis, ylabel in ((time_axis, "training step (ms)"), (memory_axis, "peak memory (MiB, XLA estimate)")):
        axis.set(xscale="log", yscale="log", xlabel="sequence length L", ylabel=ylabel)
        axis.grid(alpha=0.3, which="both")
        legend_outside(axis)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure
