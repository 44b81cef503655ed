from __future__ import annotations

import jax
import jax.numpy as jnp
from absl import flags

import rfa
from rfa.attention.kernelized import relative as relative_mode
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.benchmarks.relative import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.relative.report import table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import loglog_figure, output_path, write_report
from rfa.experiments.common.timing import environment, memory_bytes, run_once, slope, timing_summary

_LENGTHS = flags.DEFINE_list("lengths", ["256", "512", "1024", "2048", "4096", "8192"], "Sequence lengths L.")
_DENSE_MAX = flags.DEFINE_integer("dense_max", 4096, "Longest L the dense form runs at (its memory is O(L²)).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls per case and length (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_relative.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON and figure go.")

B, H, D, M = 1, 4, 32, 64  # batch, heads, head dimension, random vectors (F = m for positive features)


def case(name: str, projection):
    """``loss(q, k, v, b)`` of one case: the sum of the causal output against a fixed random direction."""

    def attend(q, k, v, b):
        options = dict(estimator="positive", projection=projection, is_causal=True)
        if name == "fft":
            return rfa.kernelized_attention(q, k, v, relative_bias=b, **options)
        if name == "dense":
            return rfa.attention.naive_kernelized_attention(q, k, v, relative_bias=b, **options)
        return rfa.kernelized_attention(q, k, v, **options)

    def loss(q, k, v, b):
        out = attend(q, k, v, b)
        return jnp.sum(out * jnp.cos(jnp.arange(out.size).reshape(out.shape)))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))


def measure(length: int, names: list[str], projection, repeats: int) -> dict:
    keys = jax.random.split(jax.random.key(length), 4)
    q, k, v = (0.5 * jax.random.normal(key, (B, length, H, D)) for key in keys[:3])
    b = 0.5 * jax.random.normal(keys[3], (H, 2 * length - 1))
    args = (q, k, v, b)
    row = {"length": length}
    for name in names:
        compiled = case(name, projection).lower(*args).compile()
        run_once(compiled, args)  # warm-up
        row[name] = {
            **timing_summary([run_once(compiled, args) for _ in range(repeats)]),
            "memory": memory_bytes(compiled),
        }
    return row


def main(argv):
    del argv
    relative_mode.FFT_FROM_LENGTH = 0  # the fft case runs the FFT form at every length (the library: from 512)
    lengths = [int(x) for x in _LENGTHS.value]
    projection = rfa.sample_projection(jax.random.key(0), M, D)
    rows = []
    for length in lengths:
        names = ["fft", "no bias"] + (["dense"] if length <= _DENSE_MAX.value else [])
        rows.append(measure(length, names, projection, _REPEATS.value))
        print(f"L = {length}: " + ", ".join(f"{n} {rows[-1][n]['median_ms']:.1f} ms" for n in names), flush=True)
    names = ("fft", "dense", "no bias")
    slopes = {n: slope([(r["length"], r[n]["median_ms"]) for r in rows if n in r]) for n in names}
    results = {
        "config": {"batch": B, "heads": H, "head_dim": D, "num_features": M, "lengths": lengths},
        "results": rows,
        "slopes": slopes,
        "environment": environment(),
    }

    text = table(results)
    print(text)

    def plot(path):
        curves = {
            n: ([r["length"] for r in rows if n in r], [r[n]["median_ms"] for r in rows if n in r]) for n in names
        }
        loglog_figure(
            curves,
            path,
            xlabel="L",
            ylabel="forward + backward (ms)",
            title="relative bias: FFT vs dense (causal, positive)",
        )

    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_relative.json")
    write_report(output, results, text, plot)
    warn_against_committed(output, results)


if __name__ == "__main__":
    run_main(main)
