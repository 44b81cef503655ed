"""The Flax decoding benchmark's table and figure, each from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from matplotlib.figure import Figure

from rfa.experiments.common.report import loglog_figure, markdown_table


def table(data: dict) -> str:
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


LABELS = {"flax": "exact (Flax's KV cache)", "rfa": "positive (rfa.nnx.MultiHeadAttention)"}


def figure(data: dict, path: str) -> Figure:
    """``rfa benchmark flax_decoding``'s JSON: µs per token against the position, one series per layer (Flax's
    layer is exact attention with its KV cache, rfa's positive features with its recurrent state)."""
    curves = {}
    for name, times in data["seconds_per_token"].items():
        positions = sorted(int(p) for p in times)
        label = LABELS.get(name, f"{name} (rfa.nnx, recurrent state)")
        curves[label] = (positions, [1e6 * times[str(p)] for p in positions])
    return loglog_figure(
        curves, path, xlabel="position", ylabel="µs per token", title="Decoding through one Flax attention layer"
    )
