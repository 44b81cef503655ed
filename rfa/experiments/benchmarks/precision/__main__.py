from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from absl import flags

import rfa
from rfa.experiments.benchmarks.guard import publish
from rfa.experiments.benchmarks.precision import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.precision.report import KINDS, table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.timing import environment, run_once, timing_summary

_LENGTHS = flags.DEFINE_list("lengths", ["512", "2048"], "Sequence lengths L.")
_KINDS = flags.DEFINE_list("kinds", list(KINDS), f"Kinds: {', '.join(KINDS)}.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls per case (median reported).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_precision.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON and table go.")

B, H, D, CHUNK = 1, 8, 64, 64  # batch, heads, head dimension, chunk length
W = rfa.sample_projection(jax.random.key(7), D, D)  # the positive map's m = 64 features
DECAYS = {"deltanet": None, "gated_deltanet": 3, "kda": 4, "kernelized": 3, "gla": 4}  # log-decays' axes


def attend(kind: str, q, k, v, beta, log_decay, **options):
    """The kind's causal attention: the delta rule (β its writing strength), or kernelized attention (β unused):
    positive features with a decay per token, or elu+1 with a decay per feature (GLA)."""
    if kind in ("kernelized", "gla"):
        estimator = {"kernelized": "positive", "gla": "elu"}[kind]
        projection = W if kind == "kernelized" else None
        options = {"return_state": False, **options}
        return rfa.kernelized_attention(
            q, k, v, estimator=estimator, projection=projection, is_causal=True, log_decay=log_decay, **options
        )
    return rfa.attention.delta_rule_attention(q, k, v, beta, log_decay=log_decay, **options)


def empty_state(kind: str):
    """The float32 state before the first token."""
    if kind in ("kernelized", "gla"):
        return rfa.attention.init_state((B,), H, D, D)
    return jnp.zeros((B, H, D, D), jnp.float32)


def state_values(state) -> jax.Array:
    """The state as one array: the delta rule's ``S``, kernelized attention's ``kv · exp(R)``."""
    return state.value() if isinstance(state, rfa.attention.RecurrentState) else state


def rounded_state(state, dtype):
    """The state's values rounded to ``dtype`` and back to float32 (a kernelized state's reference kept)."""
    if isinstance(state, rfa.attention.RecurrentState):
        return state._replace(kv=state.kv.astype(dtype).astype(jnp.float32))
    return state.astype(dtype).astype(jnp.float32)


def inputs(kind: str, length: int, weak: bool = False) -> tuple:
    """q, k (unit), v, β and the kind's log-decays, rounded to bfloat16 (weak: in [−0.001, 0])."""
    keys = jax.random.split(jax.random.key(length), 5)
    q, k = (jax.random.normal(key, (B, length, H, D)) for key in keys[:2])
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
    v, beta = jax.random.normal(keys[2], (B, length, H, D)), jax.nn.sigmoid(jax.random.normal(keys[3], (B, length, H)))
    g = None
    if DECAYS[kind] is not None:
        shape = (B, length, H, D)[: DECAYS[kind]]
        g = (
            -0.001 * jax.random.uniform(keys[4], shape)
            if weak
            else jax.nn.log_sigmoid(3.0 + jax.random.normal(keys[4], shape))
        )
    return tuple(None if x is None else x.astype(jnp.bfloat16) for x in (q, k, v, beta, g))


def loss(kind: str, compute_dtype):
    """The output against a fixed direction, and its gradients in every input."""

    def value(q, k, v, beta, g):
        out = attend(kind, q, k, v, beta, g, chunk_size=CHUNK, compute_dtype=compute_dtype)
        return jnp.sum(out.astype(jnp.float32) * jnp.cos(jnp.arange(out.size).reshape(out.shape)))

    return jax.jit(jax.value_and_grad(value, argnums=(0, 1, 2, 3, 4)))


def relative_rms(out, expected) -> float:
    out, expected = out.astype(jnp.float32), expected.astype(jnp.float32)
    return float(jnp.sqrt(jnp.mean((out - expected) ** 2) / jnp.mean(expected**2)))


def decode_errors(kind: str, length: int) -> dict:
    """The recurrent form token by token, its state carried in float32 or rounded to bfloat16 after each token,
    against the float32 chunked run, with weak decays."""
    q, k, v, beta, g = inputs(kind, length, weak=True)
    exact = [None if x is None else x.astype(jnp.float32) for x in (q, k, v, beta, g)]
    expected = attend(kind, *exact, chunk_size=CHUNK)

    tokens = tuple(None if x is None else jnp.moveaxis(x, 1, 0)[:, :, None] for x in exact)  # [L, B, 1, ...]

    @functools.partial(jax.jit, static_argnums=0)
    def decode(state_dtype):
        def token(s, t):
            out, s = attend(kind, *t, initial_state=s, return_state=True)
            return rounded_state(s, state_dtype), out[:, 0]

        return jnp.moveaxis(jax.lax.scan(token, empty_state(kind), tokens)[1], 0, 1)

    return {
        name: relative_rms(decode(dtype), expected)
        for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16))
    }


def measure(kind: str, length: int, repeats: int) -> dict:
    args = inputs(kind, length)
    exact = tuple(None if x is None else x.astype(jnp.float32) for x in args)
    cases = {"float32": (loss(kind, None), exact), "bfloat16": (loss(kind, jnp.bfloat16), args)}
    compiled = {name: (f.lower(*a).compile(), a) for name, (f, a) in cases.items()}
    for program, a in compiled.values():
        run_once(program, a)  # warm-up
    seconds = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (program, a) in compiled.items():
            seconds[name].append(run_once(program, a))
    out32, s32 = attend(kind, *exact, chunk_size=CHUNK, return_state=True)
    out16, s16 = attend(kind, *args, chunk_size=CHUNK, return_state=True, compute_dtype=jnp.bfloat16)
    s32, s16 = state_values(s32), state_values(s16)
    return {
        "kind": kind,
        "length": length,
        **{name: timing_summary(seconds[name]) for name in cases},
        "output_error": relative_rms(out16, out32),
        "state_error": relative_rms(s16, s32),
        "state_dtype": str(s16.dtype),
        "decode_error": decode_errors(kind, length),
    }


def main(argv):
    del argv
    lengths = [int(x) for x in _LENGTHS.value]
    rows = []
    for kind in _KINDS.value:
        for length in lengths:
            rows.append(measure(kind, length, _REPEATS.value))
            row = rows[-1]
            print(
                f"{kind} L = {length}: float32 {row['float32']['median_ms']:.1f} ms, bfloat16 "
                f"{row['bfloat16']['median_ms']:.1f} ms",
                flush=True,
            )
    results = {
        "config": {"batch": B, "heads": H, "head_dim": D, "chunk_size": CHUNK, "lengths": lengths},
        "results": rows,
        "ratios": {
            f"bfloat16_over_float32_{kind}": {
                r["length"]: r["bfloat16"]["median_ms"] / r["float32"]["median_ms"] for r in rows if r["kind"] == kind
            }
            for kind in _KINDS.value
        },
        "environment": environment(),
    }
    publish(results, table(results), _OUTPUT.value, _WORKDIR.value, "benchmark_precision.json")


if __name__ == "__main__":
    run_main(main)
