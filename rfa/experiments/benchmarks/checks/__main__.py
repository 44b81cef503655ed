from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from flax import nnx

import rfa
from rfa.experiments.benchmarks.checks import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.checks.report import table
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import output_path, write_json
from rfa.experiments.common.timing import environment
from rfa.models import Site
from rfa.models.forecaster import ForecastConfig, Forecaster

_LENGTH = flags.DEFINE_integer("length", 512, "Sequence length.")
_REPEATS = flags.DEFINE_integer("repeats", 30, "Timed calls per variant (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_checks.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON goes.")

B, H, D, M = 4, 4, 32, 64


def workloads(length: int) -> dict:
    """``{name: (function, args)}``: the jitted steps whose checks run at run time."""
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v = (0.5 * jax.random.normal(key, (B, length, H, D)) for key in keys[:3])
    W = rfa.sample_projection(keys[3], M, D)
    lengths = jnp.array([length, length // 2, length, 3 * length // 4])

    def masked(q, k, v, lengths):
        valid = jnp.arange(length) < lengths[:, None]
        mask = nnx.make_attention_mask(valid, valid)  # traced: its pattern is read at run time
        return jnp.sum(rfa.kernelized_attention(q, k, v, estimator="positive", projection=W, mask=mask) ** 2)

    def gated(q, k, v, logits):
        out = rfa.kernelized_attention(
            q, k, v, estimator="positive", projection=W, is_causal=True, log_decay=jax.nn.log_sigmoid(logits)
        )
        return jnp.sum(out**2)

    config = ForecastConfig(lookback=length, horizon=24, patch_length=16, attention=Site("positive", num_features=M))
    graphdef, state = nnx.split(Forecaster(config, rngs=nnx.Rngs(0)))

    def forecast(state, x):
        return nnx.merge(graphdef, state)(x)

    return {
        "traced mask": (jax.value_and_grad(masked, argnums=(0, 1, 2)), (q, k, v, lengths)),
        "traced log_decay": (jax.value_and_grad(gated, argnums=(0, 1, 2, 3)), (q, k, v, 3.0 + q[..., 0])),
        "forecaster": (forecast, (state, jax.random.normal(keys[0], (B, length, 1)))),
    }


def compiled(function, args, *, checks: bool):
    """``function`` compiled for ``args``, with its run-time checks or (``checks=False``) without."""
    with rfa.checks.enabled(checks):
        return jax.jit(function).lower(*args).compile()


def alternating_medians(runs: dict, args, repeats: int) -> dict:
    """Median seconds of each compiled function, timed in alternation so that machine noise hits all alike."""
    times = {name: [] for name in runs}
    for run in runs.values():
        jax.block_until_ready(run(*args))
    for _ in range(repeats):
        for name, run in runs.items():
            began = time.perf_counter()
            jax.block_until_ready(run(*args))
            times[name].append(time.perf_counter() - began)
    return {name: float(np.median(t)) for name, t in times.items()}


def main(argv):
    del argv
    results = {}
    for name, (function, args) in workloads(_LENGTH.value).items():
        runs = {"with": compiled(function, args, checks=True), "without": compiled(function, args, checks=False)}
        results[name] = alternating_medians(runs, args, _REPEATS.value)
    print(table({"seconds": results}))
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_checks.json")
    data = {
        "shapes": f"batch {B}, length {_LENGTH.value}, {H} heads of {D}, m = {M}",
        "environment": environment(),
        "seconds": results,
        "ratio_with_vs_without": {name: t["with"] / t["without"] for name, t in results.items()},
    }
    write_json(output, data)
    print(f"\nwrote {output}")
    warn_against_committed(output, data)


if __name__ == "__main__":
    run_main(main)
