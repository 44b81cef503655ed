"""What every benchmark (and a study that times its models) measures the same way: compiled memory, one timed call,
summaries, slopes and crossovers, the environment, a compiled decoder."""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import rfa
from rfa.models import Decoder


def memory_bytes(compiled) -> dict | None:
    """Argument, output, temp, alias and peak bytes of a compiled program; None without analysis."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    parts = {
        "argument_bytes": stats.argument_size_in_bytes,
        "output_bytes": stats.output_size_in_bytes,
        "temp_bytes": stats.temp_size_in_bytes,
        "alias_bytes": stats.alias_size_in_bytes,
    }
    parts["peak_bytes"] = parts["argument_bytes"] + parts["output_bytes"] + parts["temp_bytes"] - parts["alias_bytes"]
    return parts


def run_once(compiled, args) -> float:
    """Seconds of one call, to ``jax.block_until_ready``."""
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return time.perf_counter() - start


def medians_in_turns(runs: dict, repeats: int, per: int = 1) -> dict:
    """Median seconds (divided by ``per``: tokens per call, say) of each compiled run ``{name: (compiled, args)}``,
    every run timed in turn, in a new random order each round, so that the machine's drift and noise (and the cache
    a long run leaves behind) fall on every run alike."""
    for compiled, args in runs.values():
        jax.block_until_ready(compiled(*args))
    times = {name: [] for name in runs}
    names, order = list(runs), np.random.default_rng(0)
    for _ in range(repeats):
        for i in order.permutation(len(names)):
            times[names[i]].append(run_once(*runs[names[i]]))
    return {name: float(np.median(t)) / per for name, t in times.items()}


def timing_summary(seconds: list[float]) -> dict:
    times_ms = [1e3 * t for t in seconds]
    return {
        "median_ms": statistics.median(times_ms),
        "min_ms": min(times_ms),
        "repeats": len(times_ms),
        "times_ms": times_ms,
    }


def environment() -> dict:
    device = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "jax_version": jax.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)),  # fewer when pinned, e.g. with taskset
        "cpu": cpu_model(),
        "rfa_commit": rfa_commit(),
        "xla_flags": os.environ.get("XLA_FLAGS"),  # compiler options change what is timed
    }


VECTOR_EXTENSIONS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "asimd", "sve")


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name and the vector extensions XLA:CPU compiles for (``/proc/cpuinfo``): ratios carry from
    run to run on one such CPU; a generic model name ("Intel(R) Xeon(R) Processor") alone does not tell two apart.

    Example:
      >>> cpu_model("/nonexistent")
      'unknown'
    """
    try:
        with open(cpuinfo) as f:
            text = f.read()
    except OSError:
        return "unknown"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    extensions = " ".join(e for e in VECTOR_EXTENSIONS if e in flags)
    model = fields.get("model name") or fields.get("CPU part") or "unknown"
    return f"{model} ({extensions})" if extensions else model


def rfa_commit() -> str | None:
    """The git commit of the checkout being measured (None outside a git checkout)."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return result.stdout.strip()


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(value) against log(L); None with fewer than two points.

    Example:
      >>> round(slope([(1024, 2.0), (2048, 8.0), (4096, 32.0)]), 6)  # quadratic
      2.0
    """
    if len(points) < 2:
        return None
    lengths, values = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(lengths, values, 1)[0])


def crossover(rows: list[tuple[int, float]], reference: dict[int, float | None]) -> int | None:
    """The first length from which ``rows`` (``(L, time)``) is faster than ``reference`` (``{L: time}``) at
    every longer length; a length the reference has no time for (skipped: out of memory) counts as faster.

    Example:
      >>> crossover([(1, 5.0), (2, 3.0), (4, 4.0), (8, 5.0)], {1: 1.0, 2: 4.0, 4: 3.0, 8: 9.0})
      8
    """
    slower = [length for length, time in rows if reference.get(length) is not None and time >= reference[length]]
    return next((length for length, _ in sorted(rows) if all(s < length for s in slower)), None)


def compiled_decoder(model: Decoder, position: int, steps: int, *, checks: bool):
    """``steps`` tokens decoded from ``position`` in one jitted ``lax.scan``, compiled (with the run-time checks, or
    traced inside ``rfa.checks.enabled(False)``), and its arguments. The exact model's cache has ``position + steps``
    slots, so its attention spans the tokens so far."""
    graphdef, state = nnx.split(model)

    def decode(state, cache):
        model = nnx.merge(graphdef, state)

        def body(cache, offset):
            logits, cache = model.decode_step(jnp.array([3]), cache, position + offset)
            return cache, logits[0, 0]

        return jax.lax.scan(body, cache, jnp.arange(steps))

    cache = model.init_cache(1, position + steps)
    with rfa.checks.enabled(checks):
        return jax.jit(decode).lower(state, cache).compile(), (state, cache)


HUGE_PAGES_HELP = "Re-execute with glibc asking for transparent huge pages (rfa.experiments.common.host_memory)."
"""The help of a benchmark's ``--huge_pages`` flag (each defines its own: absl files a flag under its module)."""
