from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from absl import flags

import rfa
from rfa.experiments.benchmarks.guard import publish
from rfa.experiments.benchmarks.prefill import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.prefill.report import DECAYS, table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.timing import environment, medians_in_turns

_LENGTHS = flags.DEFINE_list(
    "lengths", ["2", "8", "32", "64", "128", "256", "512", "1024", "2048", "4096"], "Prompt lengths L."
)
_REPEATS = flags.DEFINE_integer("repeats", 50, "Timed calls per case (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_prefill.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON and table go.")

B, H, D, CHUNK = 1, 8, 64, 64  # batch, heads, head dimension, chunk length


@functools.partial(jax.jit, static_argnames="chunk_size")
def prefill(q, k, v, beta, g, *, chunk_size):
    return rfa.attention.delta_rule_attention(q, k, v, beta, log_decay=g, chunk_size=chunk_size, return_state=True)


def measure(length: int, repeats: int) -> dict:
    keys = jax.random.split(jax.random.key(length), 5)
    q, k = (jax.random.normal(key, (B, length, H, D)) for key in keys[:2])
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
    v, beta = jax.random.normal(keys[2], (B, length, H, D)), jax.nn.sigmoid(jax.random.normal(keys[3], (B, length, H)))
    g = jax.nn.log_sigmoid(3.0 + jax.random.normal(keys[4], (B, length, H, D)))
    decays = {"token": g[..., 0], "channel": g}
    runs = {
        (decay, form): (
            prefill.lower(q, k, v, beta, decays[decay], chunk_size=size).compile(),
            (q, k, v, beta, decays[decay]),
        )
        for decay in DECAYS
        for form, size in (("chunked", CHUNK), ("recurrent", 1))
    }
    medians = medians_in_turns(runs, repeats)
    return {"length": length} | {
        decay: {f"{form}_ms": 1e3 * medians[(decay, form)] for form in ("chunked", "recurrent")} for decay in DECAYS
    }


def main(argv):
    del argv
    lengths = [int(x) for x in _LENGTHS.value]
    rows = []
    for length in lengths:
        rows.append(measure(length, _REPEATS.value))
        print(f"L = {length}: " + ", ".join(f"{d} {rows[-1][d]}" for d in DECAYS), flush=True)
    results = {
        "config": {"batch": B, "heads": H, "head_dim": D, "chunk_size": CHUNK, "lengths": lengths},
        "results": rows,
        "ratios": {
            f"recurrent_over_chunked_{d}": {r["length"]: r[d]["recurrent_ms"] / r[d]["chunked_ms"] for r in rows}
            for d in DECAYS
        },
        "environment": environment(),
    }
    publish(results, table(results), _OUTPUT.value, _WORKDIR.value, "benchmark_prefill.json")


if __name__ == "__main__":
    run_main(main)
