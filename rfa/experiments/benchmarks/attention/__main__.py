from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
from absl import flags

import rfa
from rfa.experiments.benchmarks.attention import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.attention.report import (
    estimators_table,
    flops_table,
    main_table,
    per_token_table,
)
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.host_memory import reexecute_with_huge_pages
from rfa.experiments.common.report import output_path, write_json
from rfa.experiments.common.timing import (
    HUGE_PAGES_HELP,
    environment,
    memory_bytes,
    run_once,
    timing_summary,
)

BATCH, HEADS, HEAD_DIM, NUM_FEATURES = 1, 8, 64, 256
TIMED_IN_TURNS = (("exact",), ("bidir", "causal", "gated"))  # exact alone: at large L one of its runs takes seconds

_LENGTHS = flags.DEFINE_list("lengths", ["1024", "2048", "4096", "8192"], "Sequence lengths L.")
_REPEATS = flags.DEFINE_integer("repeats", 10, "Most timed runs per case (after one warm-up run).")
_MIN_REPEATS = flags.DEFINE_integer("min_repeats", 3, "Fewest timed runs per case.")
_TIME_BUDGET = flags.DEFINE_float("time_budget_s", 20.0, "Approximate seconds of timed runs per case.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_attention_<backend>.json.")
_WORKDIR = flags.DEFINE_string(
    "workdir", "workdir/benchmarks", "Where the JSON (and figure) go unless --output is given."
)
_CHUNK_SIZE = flags.DEFINE_integer("chunk_size", 64, "Tokens per chunk of the causal kernelized form.")
_SKIP_EXACT_ABOVE = flags.DEFINE_integer("skip_exact_above", None, "Skip exact attention for L above this.")
_MATMUL_SIZE = flags.DEFINE_integer("matmul_size", 8192, "n of the n×n float32 matmul timed as GPU peak.")
_ESTIMATORS = flags.DEFINE_list(
    "estimators",
    ["positive", "trig", "hyperbolic", "oprf", "hybrid", "aderf", "saderf", "sderf"],
    "Softmax-kernel estimators compared at equal m (empty: none).",
)
_ESTIMATORS_LENGTH = flags.DEFINE_integer("estimators_length", 4096, "L of the estimator comparison.")
_HUGE_PAGES = flags.DEFINE_bool("huge_pages", True, HUGE_PAGES_HELP)


def exact_attention(q, k, v):
    return jax.nn.dot_product_attention(q, k, v)


def kernelized(is_causal: bool, chunk_size: int) -> Callable:
    def attention(q, k, v, W, log_decay=None):
        return rfa.kernelized_attention(
            q,
            k,
            v,
            estimator="positive",
            projection=W,
            is_causal=is_causal,
            chunk_size=chunk_size,
            log_decay=log_decay,
        )

    return attention


def loss_and_grads(attention: Callable, argnums: tuple[int, ...] = (0, 1, 2)) -> Callable:
    """``(q, k, v, g, *rest) -> (sum(attention(q, k, v, *rest) * g), gradients w.r.t. argnums)``."""

    def loss(q, k, v, g, *rest):
        return jnp.sum(attention(q, k, v, *rest) * g)

    return jax.value_and_grad(loss, argnums=argnums)


def make_inputs(length: int) -> tuple[jax.Array, ...]:
    """q, k, v and the cotangent-like g, each ``[BATCH, length, HEADS, HEAD_DIM]`` standard normal."""
    keys = jax.random.split(jax.random.key(length), 4)
    return tuple(jax.random.normal(key, (BATCH, length, HEADS, HEAD_DIM), jnp.float32) for key in keys)


def log_decay(length: int) -> jax.Array:
    """``log_sigmoid(a)``, ``a`` standard normal, ``[BATCH, length, HEADS]``: gates spread over (0, 1)."""
    return jax.nn.log_sigmoid(jax.random.normal(jax.random.key(length + 1), (BATCH, length, HEADS)))


def time_in_turns(programs: dict[str, tuple], max_repeats: int) -> dict[str, list[float]]:
    """Seconds of timed runs of ``{case: (compiled, args)}``, one warm-up each, then the cases in turns.

    Taking the cases in turns (a, b, a, b, ...) lets a drift in the machine's speed fall on all of
    them alike instead of on whichever case ran during it. The number of turns is ``max_repeats``,
    fewer if one turn is slow (about ``--time_budget_s`` per case in all, at least ``--min_repeats``).
    """
    turn = sum(run_once(*program) for program in programs.values())
    budget = _TIME_BUDGET.value * len(programs)
    repeats = max(_MIN_REPEATS.value, min(max_repeats, int(budget / max(turn, 1e-9))))
    times = {case: [] for case in programs}
    for _ in range(repeats):
        for case, program in programs.items():
            times[case].append(run_once(*program))
    return times


def estimated_flops(case: str, length: int, chunk_size: int) -> float:
    """Dense-contraction FLOPs of forward+backward; see the module docstring."""
    L, d, m, BH = length, HEAD_DIM, NUM_FEATURES, BATCH * HEADS
    if case == "exact":
        return 12.0 * BH * L * L * d
    bidir = BH * L * (8.0 * m * d + 12.0 * m * (d + 1))
    if case == "bidir":
        return bidir
    chunk = min(chunk_size, L)
    return bidir + 3.0 * BH * L * (2.0 * chunk * m + 2.0 * chunk * (d + 1))


def case_functions(chunk_size: int) -> dict[str, Callable]:
    return {
        "exact": loss_and_grads(exact_attention),
        "bidir": loss_and_grads(kernelized(False, chunk_size)),
        "causal": loss_and_grads(kernelized(True, chunk_size)),
        "gated": loss_and_grads(kernelized(True, chunk_size), argnums=(0, 1, 2, 5)),  # and d/d log_decay
    }


def skipped(case: str, length: int) -> bool:
    limit = _SKIP_EXACT_ABOVE.value
    return case == "exact" and limit is not None and length > limit


def ratio(numerator: dict | None, denominator: dict | None) -> float | None:
    if numerator is None or denominator is None:
        return None
    return numerator["median_ms"] / denominator["median_ms"]


def bench_length(length: int, functions: dict[str, Callable], W: jax.Array, on_gpu: bool) -> dict:
    """All cases at one length, with their per-token memory, FLOP/s (GPU) and the time ratios."""
    q, k, v, g = make_inputs(length)
    cases = {case: None for case in functions}
    programs = {}
    for case, fn in functions.items():
        if skipped(case, length):
            continue
        args = {"exact": (q, k, v, g), "gated": (q, k, v, g, W, log_decay(length))}.get(case, (q, k, v, g, W))
        compiled = jax.jit(fn).lower(*args).compile()
        memory = memory_bytes(compiled)
        cases[case] = {
            "memory": memory,
            "peak_bytes_per_token": None if memory is None else memory["peak_bytes"] / length,
            "estimated_flops": estimated_flops(case, length, _CHUNK_SIZE.value),
        }
        programs[case] = (compiled, args)
    for group in TIMED_IN_TURNS:
        group_programs = {case: programs[case] for case in group if case in programs}
        for case, seconds in time_in_turns(group_programs, _REPEATS.value).items():
            result = cases[case]
            result.update(timing_summary(seconds))
            if on_gpu:
                result["achieved_flops_per_s"] = result["estimated_flops"] / (1e-3 * result["median_ms"])
            print(
                f"L={length:6d} {case:6s} median {result['median_ms']:10.2f} ms  min {result['min_ms']:10.2f} ms  "
                f"({result['repeats']} runs)",
                flush=True,
            )
    ratios = {
        "exact_over_bidir": ratio(cases["exact"], cases["bidir"]),
        "causal_over_bidir": ratio(cases["causal"], cases["bidir"]),
        "gated_over_causal": ratio(cases["gated"], cases["causal"]),
    }
    return {"length": length, "cases": cases, "ratios": ratios}


def estimator_attention(name: str) -> Callable:
    def attention(q, k, v, W, params):
        return rfa.kernelized_attention(q, k, v, estimator=name, projection=W, feature_params=params or None)

    return attention


def head_major(fm: rfa.Estimator, q: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
    """q and k as attention hands them to the fit: temperature-scaled, ``[batch, heads, L, d]``."""
    return tuple(jnp.swapaxes(x, -3, -2) for x in rfa.attention.kernelized.temperature(fm, q, k))


def bench_estimators(length: int, names: list[str]) -> dict:
    """Forward+backward of every estimator at equal m, timed in turns; the fit's share of a forward pass."""
    q, k, v, g = make_inputs(length)
    training, fitting = {}, {}
    for name in names:
        fm = rfa.estimator(name)
        W, sampled = fm.draw(jax.random.key(0), NUM_FEATURES, HEAD_DIM)
        args = (q, k, v, g, W, sampled)
        training[name] = (jax.jit(loss_and_grads(estimator_attention(name))).lower(*args).compile(), args)
        if fm.fit is not None:
            forward_args = (q, k, v, W, sampled)
            forward = jax.jit(estimator_attention(name)).lower(*forward_args).compile()
            fit_args = head_major(fm, q, k)
            fit = jax.jit(fm.fit).lower(*fit_args).compile()
            fitting[name] = {"forward": (forward, forward_args), "fit": (fit, fit_args)}
    times = {name: timing_summary(seconds) for name, seconds in time_in_turns(training, _REPEATS.value).items()}
    rows = {}
    for name in names:
        fm = rfa.estimator(name)
        rows[name] = {"features": fm.num_outputs(NUM_FEATURES, HEAD_DIM), **times[name]}
        if "positive" in times:
            rows[name]["over_positive"] = ratio(times[name], times["positive"])
        if name in fitting:
            fit_times = time_in_turns(fitting[name], _REPEATS.value)
            rows[name]["fit"] = timing_summary(fit_times["fit"])
            rows[name]["forward"] = timing_summary(fit_times["forward"])
            rows[name]["fit_over_forward"] = ratio(rows[name]["fit"], rows[name]["forward"])
            rows[name]["fit_over_training"] = ratio(rows[name]["fit"], times[name])
        print(f"L={length} {name:10s} fwd+bwd median {rows[name]['median_ms']:9.2f} ms", flush=True)
    return {"length": length, "estimators": rows}


def matmul_peak(n: int) -> dict:
    """FLOP/s of an n×n float32 matmul at default precision, the reference peak."""
    a, b = (jax.random.normal(key, (n, n), jnp.float32) for key in jax.random.split(jax.random.key(1), 2))
    compiled = jax.jit(jnp.matmul).lower(a, b).compile()
    seconds = statistics.median(time_in_turns({"matmul": (compiled, (a, b))}, _REPEATS.value)["matmul"])
    return {"n": n, "median_ms": 1e3 * seconds, "flops_per_s": 2.0 * n**3 / seconds}


def config() -> dict:
    return {
        "batch": BATCH,
        "heads": HEADS,
        "head_dim": HEAD_DIM,
        "num_features": NUM_FEATURES,
        "estimator": "positive",
        "dtype": "float32",
        "chunk_size": _CHUNK_SIZE.value,
        "repeats": _REPEATS.value,
        "min_repeats": _MIN_REPEATS.value,
        "time_budget_s": _TIME_BUDGET.value,
        "skip_exact_above": _SKIP_EXACT_ABOVE.value,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
        "memory_definition": "argument + output + temp - alias bytes of the compiled forward+backward program",
    }


def main(argv):
    del argv
    if _HUGE_PAGES.value:
        reexecute_with_huge_pages(["-m", "rfa.experiments.benchmarks.attention", *sys.argv[1:]])
    env = environment()
    on_gpu = env["backend"] == "gpu"
    print(f"backend {env['backend']} ({env['device_kind']}), jax {env['jax_version']}", flush=True)
    W = rfa.sample_projection(jax.random.key(0), NUM_FEATURES, HEAD_DIM)
    functions = case_functions(_CHUNK_SIZE.value)
    results = [bench_length(int(length), functions, W, on_gpu) for length in _LENGTHS.value]
    estimators = bench_estimators(_ESTIMATORS_LENGTH.value, _ESTIMATORS.value) if _ESTIMATORS.value else None
    peak = matmul_peak(_MATMUL_SIZE.value) if on_gpu else None
    print("\n" + main_table(results) + "\n\n" + per_token_table(results))
    if estimators is not None:
        print(f"\nEstimators at L = {estimators['length']}, m = {NUM_FEATURES}:\n" + estimators_table(estimators))
    if peak is not None:
        print("\n" + flops_table(results, peak))
    output = output_path(_OUTPUT.value, _WORKDIR.value, f"benchmark_attention_{env['backend']}.json")
    data = {"environment": env, "config": config(), "matmul_peak": peak, "results": results, "estimators": estimators}
    write_json(output, data)
    warn_against_committed(output, data, env["backend"])
    print(f"\nwrote {output}")


if __name__ == "__main__":
    run_main(main)
