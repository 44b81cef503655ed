"""The tables of the benchmarks whose JSON a results page quotes, each rendered from that JSON alone.

The benchmarks print them when they run, and ``rfa tables`` renders them again for ``docs/results/benchmarks.md``
(free of the benchmarks' flags and of JAX, so that rendering imports neither).
"""

from __future__ import annotations

from rfa.experiments.report import markdown_table, number, setting_name

DELTA_RULE_CASES = ("delta chunked", "kda chunked", "delta recurrent", "gla chunked", "gated causal", "exact")
"""The cases of ``rfa benchmark delta_rule``, in the order of its table's columns."""
DELTA_RULE_RATIOS = {  # name: (numerator, denominator, target or None)
    "delta_over_gla": ("delta chunked", "gla chunked", None),
    "gla_over_gated_causal": ("gla chunked", "gated causal", 2.0),
    "kda_over_delta": ("kda chunked", "delta chunked", 2.0),
}
"""The ratios of ``rfa benchmark delta_rule``'s cases that its table gives at every length, with their targets."""


def delta_rule_ratio(row: dict, name: str) -> float:
    """One ratio of :data:`DELTA_RULE_RATIOS` in one length's row of ``rfa benchmark delta_rule``'s results."""
    top, bottom, _ = DELTA_RULE_RATIOS[name]
    return row[top]["median_ms"] / row[bottom]["median_ms"]


def delta_rule_table(results: dict) -> str:
    """``rfa benchmark delta_rule``'s JSON: each case's median time and the ratios per length, the log-log slopes,
    and each targeted ratio at the longest length against its target."""
    rows = results["results"]

    def milliseconds(row, name):
        return f"{row[name]['median_ms']:.1f}" if name in row else "-"

    text = markdown_table(
        [
            "L",
            *(f"{case} (ms)" for case in DELTA_RULE_CASES),
            *(f"{top} / {bottom}" for top, bottom, _ in DELTA_RULE_RATIOS.values()),
        ],
        [
            [
                str(row["length"]),
                *(milliseconds(row, case) for case in DELTA_RULE_CASES),
                *(f"{delta_rule_ratio(row, name):.2f}" for name in DELTA_RULE_RATIOS),
            ]
            for row in rows
        ],
    )
    text += "\n\nlog-log slope of time against L: " + ", ".join(
        f"{case} {s:.2f}" for case, s in results["slopes"].items() if s is not None
    )
    longest = rows[-1]
    for name, (top, bottom, target) in DELTA_RULE_RATIOS.items():
        if target is not None:
            value = delta_rule_ratio(longest, name)
            verdict = "met" if value <= target else f"NOT met, by {value / target:.2f}x"
            text += f"\n\n{top} / {bottom} at L = {longest['length']}: {value:.2f} (target <= {target:g}: {verdict})."
    return text


def decoding_table(summary: dict) -> str:
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


def input_work_table(result: dict) -> str:
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


def scaling_by_length(results: list[dict]) -> str:
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


def relative_table(results: dict) -> str:
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


def flax_decoding_table(data: dict) -> str:
    """µs per token of every layer at every position, and rfa's speed-up over Flax's cache."""
    seconds = data["seconds_per_token"]
    positions = list(seconds["flax"])
    rows = [
        [
            str(p),
            *(f"{1e6 * seconds[name][p]:.1f}" for name in seconds),
            f"{seconds['flax'][p] / seconds['rfa'][p]:.2f}x",
        ]
        for p in positions
    ]
    return markdown_table(["position", *(f"{name} µs/token" for name in seconds), "rfa speed-up"], rows)


def checks_table(data: dict) -> str:
    """Each workload's median without and with its checks, and their ratio."""
    rows = [
        [name, f"{1e3 * t['without']:.2f}", f"{1e3 * t['with']:.2f}", f"{t['with'] / t['without']:.3f}"]
        for name, t in data["seconds"].items()
    ]
    return markdown_table(["workload", "without checks (ms)", "with checks (ms)", "ratio"], rows)


def train_step_table(data: dict) -> str:
    """``rfa benchmark train_step``: per study config, every setting's median training step and its ratio to exact
    attention's in the same config (timed side by side, in one process), and where its model is a decoder, the same
    of a decoded token ("-" elsewhere)."""

    def timed(config: dict, key: str, times: str, ratios: str, scale: float) -> list[str]:
        return [
            number(config.get(times, {}).get(key), scale, "{:.1f}"),
            number(config.get(ratios, {}).get(f"{key}_over_exact"), 1, "{:.2f}x"),
        ]

    rows = [
        [
            name,
            setting_name(setting["attention"], None, setting.get("qk_map")),
            "-" if setting["num_features"] is None else str(setting["num_features"]),
            f"{setting['batch_size']} × {setting['max_length']}",
            *timed(config, key, "seconds_per_step", "ratios", 1e3),
            *timed(config, key, "seconds_per_token", "decode_ratios", 1e6),
        ]
        for name, config in data["configs"].items()
        for key, setting in config["settings"].items()
    ]
    header = ["config", "attention", "m", "batch × length", "ms per step", "/ exact", "µs per decoded token", "/ exact"]
    return markdown_table(header, rows)
