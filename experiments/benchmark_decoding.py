"""Time per decoded token against position: exact attention (KV cache) vs kernelized (recurrent state).

Run: ``python -m experiments.benchmark_decoding`` (``make benchmark``). A ``tiny`` decoder-only
model (d_model 32, 4 heads, 2 layers) decodes one token at positions 128 .. 8192, batch 1. The
exact model's KV cache holds exactly the tokens so far (``position + 1`` slots), so its step costs
O(position); the kernelized model's state ``(S, z)`` has a fixed size, so its step should cost the
same at any position (target: time at 8192 <= 1.2x time at 128). Median of repeated jitted steps;
writes JSON.
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from flax import nnx

from experiments.tables import markdown_table
from rfa.models import AttentionConfig, Decoder, preset

_POSITIONS = flags.DEFINE_list("positions", ["128", "512", "2048", "8192"], "Decoding positions to time.")
_REPEATS = flags.DEFINE_integer("repeats", 200, "Timed steps per position (median reported).")
_OUTPUT = flags.DEFINE_string("output", "results/benchmark_decoding_cpu.json", "Where the JSON is written.")
KINDS = {"exact": AttentionConfig(), "kernelized": AttentionConfig("positive", 64)}


def time_step(model: Decoder, position: int, repeats: int) -> float:
    """Median seconds of one jitted decode step at ``position`` (cache sized ``position + 1``)."""
    cache = model.init_cache(1, position + 1)
    step = nnx.jit(lambda model, token, cache, position: model.decode_step(token, cache, position))
    token, where = jnp.array([3]), jnp.asarray(position)
    logits, cache = step(model, token, cache, where)  # compile
    jax.block_until_ready(logits)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        logits, cache = step(model, token, cache, where)
        jax.block_until_ready(logits)
        times.append(time.perf_counter() - began)
    return float(np.median(times))


def main(argv):
    del argv
    positions = [int(p) for p in _POSITIONS.value]
    results = {}
    for name, attention in KINDS.items():
        config = preset("tiny", vocab_size=256, max_length=max(positions) + 1, decoder_attention=attention)
        model = Decoder(config, rngs=nnx.Rngs(0))
        results[name] = {p: time_step(model, p, _REPEATS.value) for p in positions}
    rows = []
    for p in positions:
        exact, kernelized = results["exact"][p], results["kernelized"][p]
        rows.append([str(p), f"{1e6 * exact:.0f}", f"{1e6 * kernelized:.0f}",
                     f"{kernelized / results['kernelized'][positions[0]]:.2f}x"])  # fmt: skip
    header = ["position", "exact µs/token", "kernelized µs/token", f"kernelized vs position {positions[0]}"]
    print(markdown_table(header, rows))
    summary = {
        "model": "tiny decoder (d_model 32, 4 heads, 2 layers), batch 1; kernelized = positive, m = 64",
        "device": str(jax.devices()[0].device_kind),
        "seconds_per_token": {name: {str(p): t for p, t in times.items()} for name, times in results.items()},
        "kernelized_ratio_last_vs_first": results["kernelized"][positions[-1]] / results["kernelized"][positions[0]],
    }
    if _OUTPUT.value:
        os.makedirs(os.path.dirname(_OUTPUT.value) or ".", exist_ok=True)
        with open(_OUTPUT.value, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    app.run(main)
