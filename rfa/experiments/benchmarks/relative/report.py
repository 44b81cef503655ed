"""The relative-bias benchmark's table, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table


def table(results: dict) -> str:
    """Time and peak memory per length, and the log-log slopes, from the benchmark's JSON."""

    def milliseconds(row, name):
        return f"{row[name]['median_ms']:.1f}" if name in row else "-"

    def mebibytes(row, name):
        return f"{row[name]['memory']['peak_bytes'] / 2**20:.0f}" if name in row and row[name]["memory"] else "-"

    text = markdown_table(
        ["L", "fft (ms)", "dense (ms)", "no bias (ms)", "fft / dense", "fft peak (MiB)", "dense peak (MiB)"],
        [
            [
                str(r["length"]),
                milliseconds(r, "fft"),
                milliseconds(r, "dense"),
                milliseconds(r, "no bias"),
                f"{r['fft']['median_ms'] / r['dense']['median_ms']:.2f}" if "dense" in r else "-",
                mebibytes(r, "fft"),
                mebibytes(r, "dense"),
            ]
            for r in results["results"]
        ],
    )
    return (
        text
        + "\n\nlog-log slope of time against L: "
        + ", ".join(f"{n} {s:.2f}" for n, s in results["slopes"].items() if s is not None)
    )
