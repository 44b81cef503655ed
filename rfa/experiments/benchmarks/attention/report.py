"""The tables of the attention benchmark (:mod:`rfa.experiments.benchmarks.attention`), from its results."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table

CASES = ("exact", "bidir", "causal", "gated")  # the columns, in the benchmark's order
MIB = 2**20


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def estimators_table(result: dict) -> str:
    header = [
        "estimator",
        "features",
        "fwd+bwd ms",
        "x positive",
        "fit ms",
        "forward ms",
        "fit / forward",
        "fit / fwd+bwd",
    ]
    rows = []
    for name, row in result["estimators"].items():
        rows.append(
            [
                name,
                str(row["features"]),
                fmt(row["median_ms"], ".1f"),
                fmt(row.get("over_positive"), ".2f"),
                fmt(field(row.get("fit"), "median_ms"), ".2f"),
                fmt(field(row.get("forward"), "median_ms"), ".1f"),
                percent(row.get("fit_over_forward")),
                percent(row.get("fit_over_training")),
            ]
        )
    return markdown_table(header, rows)


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def field(result: dict | None, key: str) -> float | None:
    return None if result is None else result[key]


def peak_mib(result: dict | None) -> float | None:
    if result is None or result["memory"] is None:
        return None
    return result["memory"]["peak_bytes"] / MIB


TIMES = {
    "exact": "exact ms",
    "bidir": "kernelized bidir ms",
    "causal": "kernelized causal ms",
    "gated": "gated causal ms",
}
RATIOS = {
    "exact_over_bidir": ("exact/bidir (x)", ".1f"),
    "causal_over_bidir": ("causal/bidir (x)", ".2f"),
    "gated_over_causal": ("gated/causal (x)", ".2f"),
}


def main_table(results: list[dict]) -> str:
    """Time, ratios and peak memory per length, in the columns of the cases and ratios some length measured."""
    cases = [c for c in CASES if any(entry["cases"].get(c) for entry in results)]
    ratios = [r for r in RATIOS if any(entry["ratios"].get(r) is not None for entry in results)]
    header = ["L", *(TIMES[c] for c in cases), *(RATIOS[r][0] for r in ratios), *(f"{c} peak MiB" for c in cases)]
    rows = []
    for entry in results:
        row = [str(entry["length"])] + [fmt(field(entry["cases"].get(c), "median_ms"), ".1f") for c in cases]
        row += [fmt(entry["ratios"].get(r), RATIOS[r][1]) for r in ratios]
        row += [fmt(peak_mib(entry["cases"].get(c)), ".1f") for c in cases]
        rows.append(row)
    return markdown_table(header, rows)


def per_token_table(results: list[dict]) -> str:
    header = ["L"] + [f"{case} peak KiB/token" for case in CASES]
    rows = []
    for entry in results:
        per_token = [field(entry["cases"][c], "peak_bytes_per_token") for c in CASES]
        rows.append([str(entry["length"])] + [fmt(None if b is None else b / 1024, ".1f") for b in per_token])
    return markdown_table(header, rows)


def flops_table(results: list[dict], peak: dict) -> str:
    header = ["L"] + [f"{case} TFLOP/s" for case in CASES] + ["matmul peak TFLOP/s"]
    rows = []
    for entry in results:
        achieved = [field(entry["cases"][c], "achieved_flops_per_s") for c in CASES]
        row = [str(entry["length"])] + [fmt(None if f is None else f / 1e12, ".2f") for f in achieved]
        rows.append([*row, f"{peak['flops_per_s'] / 1e12:.2f}"])
    return markdown_table(header, rows)
