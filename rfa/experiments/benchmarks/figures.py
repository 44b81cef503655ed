"""The benchmarks' figures, each drawn from its benchmark's JSON alone, so that ``rfa tables`` redraws the committed
ones (``results/benchmark_<name>_cpu.png``) without running anything, and a test holds their styles
(:mod:`rfa.experiments.styles`: each kind in the style it has in every figure).

A module of its own, without the benchmarks' command-line flags: importing two benchmark modules into one process
would define their flags twice.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from rfa.experiments.benchmarks.common import loglog_figure
from rfa.experiments.styles import legend_outside, styles

DELTA_RULE_LABELS = {  # each case of `rfa benchmark delta_rule` as the kind it runs, in its order
    "delta chunked": "deltanet (chunked)",
    "kda chunked": "kda (chunked)",
    "delta recurrent": "deltanet (recurrent)",
    "gla chunked": "gla (chunked)",
    "gated causal": "positive (gated, causal)",
    "exact": "exact",
}
FLAX_DECODING_LABELS = {"flax": "exact (Flax's KV cache)", "rfa": "positive (rfa.nnx.MultiHeadAttention)"}


def delta_rule(results: dict, path: str) -> Figure:
    """``rfa benchmark delta_rule``'s JSON: forward + backward time against L, one series per case."""
    rows, config = results["results"], results["config"]
    curves = {
        label: ([r["length"] for r in rows if case in r], [r[case]["median_ms"] for r in rows if case in r])
        for case, label in DELTA_RULE_LABELS.items()
        if any(case in r for r in rows)
    }
    title = f"causal attention, [{config['batch']}, L, {config['heads']}, {config['head_dim']}], forward + backward"
    return loglog_figure(curves, path, xlabel="L", ylabel="forward + backward (ms)", title=title)


def flax_decoding(data: dict, path: str) -> Figure:
    """``rfa benchmark flax_decoding``'s JSON: µs per token against the position, one series per layer (Flax's
    layer is exact attention with its KV cache, rfa's positive features with its recurrent state)."""
    curves = {}
    for name, times in data["seconds_per_token"].items():
        positions = sorted(int(p) for p in times)
        label = FLAX_DECODING_LABELS.get(name, f"{name} (rfa.nnx, recurrent state)")
        curves[label] = (positions, [1e6 * times[str(p)] for p in positions])
    return loglog_figure(
        curves, path, xlabel="position", ylabel="µs per token", title="Decoding through one Flax attention layer"
    )


def scaling(data: dict, path: str) -> Figure:
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
