from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from absl import flags

import rfa
from rfa.experiments.benchmarks.delta_rule import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.delta_rule.report import CASES, RATIOS, figure, ratio, table
from rfa.experiments.benchmarks.guard import publish
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.timing import environment, memory_bytes, run_once, slope, timing_summary

_LENGTHS = flags.DEFINE_list("lengths", ["512", "1024", "2048", "4096"], "Sequence lengths L.")
_RECURRENT_MAX = flags.DEFINE_integer("recurrent_max", 2048, "Longest L the recurrent form runs at.")
_EXACT_MAX = flags.DEFINE_integer("exact_max", 4096, "Longest L exact attention runs at (its memory is O(L²)).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls per case and length (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_delta_rule.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON and figure go.")

B, H, D, CHUNK = 1, 8, 64, 64  # batch, heads, head dimension, chunk length


def attend(name: str, q, k, v, beta, log_decay):
    """The case's causal attention; the delta rule gets unit keys and queries, as its models give it.
    ``log_decay`` is ``[B, L, H, D]``; the cases with one decay per token take its first channel."""
    per_token = log_decay[..., 0]
    if name in ("delta chunked", "kda chunked", "delta recurrent"):
        q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
        chunk = 1 if name == "delta recurrent" else CHUNK
        decay = log_decay if name == "kda chunked" else per_token
        return rfa.attention.delta_rule_attention(q, k, v, beta, log_decay=decay, chunk_size=chunk)
    if name in ("gla chunked", "gated causal"):
        decay = log_decay if name == "gla chunked" else per_token
        return rfa.kernelized_attention(
            q, k, v, estimator="elu", projection=None, is_causal=True, log_decay=decay, chunk_size=CHUNK
        )
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def loss(name: str):
    """``loss(q, k, v, beta, log_decay)``: the output against a fixed direction, differentiated in every input."""

    def value(q, k, v, beta, log_decay):
        out = attend(name, q, k, v, beta, log_decay)
        return jnp.sum(out * jnp.cos(jnp.arange(out.size).reshape(out.shape)))

    return jax.jit(jax.value_and_grad(value, argnums=(0, 1, 2, 3, 4)))


def measure(length: int, names: list[str], repeats: int) -> dict:
    keys = jax.random.split(jax.random.key(length), 5)
    q, k, v = (0.5 * jax.random.normal(key, (B, length, H, D)) for key in keys[:3])
    beta = jax.nn.sigmoid(jax.random.normal(keys[3], (B, length, H)))
    log_decay = jax.nn.log_sigmoid(3.0 + jax.random.normal(keys[4], (B, length, H, D)))  # one per feature
    args = (q, k, v, beta, log_decay)
    compiled = {name: loss(name).lower(*args).compile() for name in names}
    for name in names:
        run_once(compiled[name], args)  # warm-up
    seconds = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            seconds[name].append(run_once(compiled[name], args))
    return {"length": length} | {
        name: {**timing_summary(seconds[name]), "memory": memory_bytes(compiled[name])} for name in names
    }


def main(argv):
    del argv
    lengths = [int(x) for x in _LENGTHS.value]
    rows = []
    for length in lengths:
        names = [
            n
            for n in CASES
            if (n != "delta recurrent" or length <= _RECURRENT_MAX.value)
            and (n != "exact" or length <= _EXACT_MAX.value)
        ]
        rows.append(measure(length, names, _REPEATS.value))
        print(f"L = {length}: " + ", ".join(f"{n} {rows[-1][n]['median_ms']:.1f} ms" for n in names), flush=True)
    slopes = {n: slope([(r["length"], r[n]["median_ms"]) for r in rows if n in r]) for n in CASES}
    ratios = {name: {r["length"]: ratio(r, name) for r in rows} for name in RATIOS}
    results = {
        "config": {"batch": B, "heads": H, "head_dim": D, "chunk_size": CHUNK, "lengths": lengths},
        "results": rows,
        "slopes": slopes,
        "ratios": ratios,
        "environment": environment(),
    }

    plot = functools.partial(figure, results)
    publish(results, table(results), _OUTPUT.value, _WORKDIR.value, "benchmark_delta_rule.json", plot)


if __name__ == "__main__":
    run_main(main)
