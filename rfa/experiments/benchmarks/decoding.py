"""Time per decoded token against position: exact attention (KV cache) vs kernelized (recurrent state).

Run: ``rfa benchmark decoding`` (``make benchmark``). A ``tiny`` decoder-only
model (d_model 32, 4 heads, 2 layers) decodes tokens from positions 128 .. 8192, batch 1. The
exact model's KV cache holds only the tokens up to the last timed one (``position + steps`` slots),
so its step costs O(position); the kernelized models' state ``(S, z)`` has a fixed size, so their step should cost the
same at any position (target: time at 8192 <= 1.2x time at 128), the gated model's (gated RFA: a learned decay
per token and head) included, as should Gated DeltaNet's (the delta rule's state) and the sliding window's (a ring of
its last 64 keys and values). Each timing decodes ``--steps``
tokens in one jitted ``lax.scan`` (as ``rfa.models.decoding.generate`` does), so Python dispatch
is not counted; median of ``--repeats`` calls; writes JSON.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from flax import nnx

from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.cli import run_main
from rfa.experiments.report import markdown_table, output_path, write_json
from rfa.models import AttentionConfig, Decoder, preset

_POSITIONS = flags.DEFINE_list("positions", ["128", "512", "2048", "8192"], "Decoding positions to time.")
_STEPS = flags.DEFINE_integer("steps", 64, "Tokens decoded per timed call (one jitted scan).")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed calls per position (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_decoding.json.")
_WORKDIR = flags.DEFINE_string(
    "workdir", "workdir/benchmarks", "Where the JSON (and figure) go unless --output is given."
)
KINDS = {
    "exact": AttentionConfig(),
    "kernelized": AttentionConfig("positive", 64),
    "gated": AttentionConfig("rfa", 64, gated=True),
    "gated_deltanet": AttentionConfig("gated_deltanet"),
    "sliding_window": AttentionConfig("sliding_window", 64),  # a window of 64 tokens
}
RECURRENT = ("kernelized", "gated", "gated_deltanet", "sliding_window")  # their step should not grow with position


def time_per_token(model: Decoder, position: int, steps: int, repeats: int) -> float:
    """Median seconds per token of ``steps`` tokens decoded from ``position`` in one jitted ``lax.scan``.

    The exact model's cache has ``position + steps`` slots, so its attention spans the tokens so far.
    """
    graphdef, state = nnx.split(model)

    @jax.jit
    def decode(state, cache):
        model = nnx.merge(graphdef, state)

        def body(cache, offset):
            logits, cache = model.decode_step(jnp.array([3]), cache, position + offset)
            return cache, logits[0, 0]

        return jax.lax.scan(body, cache, jnp.arange(steps))

    cache = model.init_cache(1, position + steps)
    jax.block_until_ready(decode(state, cache))  # compile
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        jax.block_until_ready(decode(state, cache))
        times.append(time.perf_counter() - began)
    return float(np.median(times)) / steps


def main(argv):
    del argv
    positions = [int(p) for p in _POSITIONS.value]
    results = {}
    for name, attention in KINDS.items():
        config = preset("tiny", vocab_size=256, max_length=max(positions) + _STEPS.value, decoder_attention=attention)
        model = Decoder(config, rngs=nnx.Rngs(0))
        results[name] = {p: time_per_token(model, p, _STEPS.value, _REPEATS.value) for p in positions}
    first, last = positions[0], positions[-1]
    rows = [
        [
            str(p),
            *(f"{1e6 * results[name][p]:.0f}" for name in KINDS),
            *(f"{results[name][p] / results[name][first]:.2f}x" for name in RECURRENT),
        ]
        for p in positions
    ]
    header = [
        "position",
        *(f"{name} µs/token" for name in KINDS),
        *(f"{name} vs position {first}" for name in RECURRENT),
    ]
    print(markdown_table(header, rows))
    ratios = {name: results[name][last] / results[name][first] for name in RECURRENT}
    for name, ratio in ratios.items():
        verdict = "met" if ratio <= 1.2 else "NOT met"
        print(f"\n{name}: time per token at {last} is {ratio:.2f}x its time at {first} (target <= 1.2x: {verdict}).")
    summary = {
        "model": "tiny decoder (d_model 32, 4 heads, 2 layers), batch 1; kernelized = positive, m = 64; "
        "gated = gated RFA (rfa, m = 64, gated=True)",
        "device": str(jax.devices()[0].device_kind),
        "seconds_per_token": {name: {str(p): t for p, t in times.items()} for name, times in results.items()},
        "kernelized_ratio_last_vs_first": ratios["kernelized"],
        "gated_ratio_last_vs_first": ratios["gated"],
    }
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_decoding.json")
    write_json(output, summary)
    print(f"\nwrote {output}")
    warn_against_committed(output, summary)


if __name__ == "__main__":
    run_main(main)
