from __future__ import annotations

import jax
import jax.numpy as jnp
from absl import flags
from flax import nnx

import rfa
from rfa.experiments.benchmarks.flax_decoding import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.flax_decoding.report import figure as draw
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import markdown_table, output_path, write_json
from rfa.experiments.common.timing import crossover, environment, medians_in_turns

_POSITIONS = flags.DEFINE_list(
    "positions", ["16", "32", "64", "128", "256", "512", "1024", "2048", "8192", "16384"], "Decoding positions to time."
)
_FEATURES = flags.DEFINE_integer("features", 256, "Layer width (in_features = qkv_features).")
_HEADS = flags.DEFINE_integer("heads", 8, "Attention heads.")
_NUM_FEATURES = flags.DEFINE_integer("num_features", 256, "m, the random features of rfa's layer.")
_BATCH = flags.DEFINE_integer("batch", 1, "Sequences decoded at once.")
_STEPS = flags.DEFINE_integer("steps", 32, "Tokens decoded per timed call (one jitted scan).")
_REPEATS = flags.DEFINE_integer("repeats", 10, "Timed calls per position (median reported).")
_LAYERS = flags.DEFINE_list("layers", None, "Layers to time (default: all; flax and rfa are always timed).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_flax_decoding.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON and the figure go.")

TARGET = 1.2  # rfa's time per token at the last position over its time at the first
GUARD_TOLERANCE = 0.3  # the speed guard's: these ratios moved by up to 0.2 between quiet runs (1.04, 1.18, 1.20)


STATE_LAYERS = ("deltanet", "gated_deltanet", "kda", "gla")


def layers(features: int, heads: int, num_features: int) -> dict[str, nnx.Module]:
    """Flax's softmax layer, rfa's (the same weights: same rngs) and rfa's layers whose cache is a state."""
    return {
        "flax": nnx.MultiHeadAttention(heads, features, decode=True, rngs=nnx.Rngs(0)),
        "rfa": rfa.nnx.MultiHeadAttention(heads, features, num_features=num_features, decode=True, rngs=nnx.Rngs(0)),
        "deltanet": rfa.nnx.DeltaNet(heads, features, decode=True, rngs=nnx.Rngs(0)),
        "gated_deltanet": rfa.nnx.GatedDeltaNet(heads, features, decode=True, rngs=nnx.Rngs(0)),
        "kda": rfa.nnx.KimiDeltaAttention(heads, features, decode=True, rngs=nnx.Rngs(0)),
        "gla": rfa.nnx.GatedLinearAttention(heads, features, decode=True, rngs=nnx.Rngs(0)),
    }


def decoder(layer: nnx.Module, position: int, *, batch: int, steps: int, checks: bool = True):
    """A compiled call decoding ``steps`` tokens from ``position`` in one ``lax.scan`` (traced inside
    ``rfa.checks.enabled(checks)``), and its argument."""
    features = layer.in_features
    layer.init_cache((batch, position + steps, features))
    if hasattr(layer, "cache_index"):  # Flax attends to every slot: only the size matters
        layer.cache_index[...] = jnp.array(position, jnp.int32)
    graphdef, state = nnx.split(layer)
    tokens = 0.1 * jax.random.normal(jax.random.key(1), (steps, batch, 1, features))

    def decode(state):
        def body(state, token):
            layer = nnx.merge(graphdef, state)
            y = layer(token, decode=True)
            return nnx.state(layer), y[:, 0, 0]

        return jax.lax.scan(body, state, tokens)[1]

    with rfa.checks.enabled(checks):
        return jax.jit(decode).lower(state).compile(), (state,)


def main(argv):
    del argv
    positions = [int(p) for p in _POSITIONS.value]
    first = min((p for p in positions if p >= 128), default=positions[0])  # the target's reference position
    built = layers(_FEATURES.value, _HEADS.value, _NUM_FEATURES.value)
    built = {
        name: layer for name, layer in built.items() if not _LAYERS.value or name in {*_LAYERS.value, "flax", "rfa"}
    }
    runs = {
        (name, p): decoder(layer, p, batch=_BATCH.value, steps=_STEPS.value)
        for name, layer in built.items()
        for p in positions
    }
    rfa_layers = [name for name in built if name != "flax"]
    runs |= {
        (name, "unchecked"): decoder(built[name], first, batch=_BATCH.value, steps=_STEPS.value, checks=False)
        for name in rfa_layers
    }
    timed = medians_in_turns(runs, _REPEATS.value, per=_STEPS.value)
    results = {name: {p: timed[(name, p)] for p in positions} for name in built}
    checks_cost = {name: timed[(name, first)] / timed[(name, "unchecked")] for name in rfa_layers}
    last = positions[-1]
    flat = {name: results[name][last] / results[name][first] for name in rfa_layers}
    ratio = flat["rfa"]
    faster_from = crossover(list(results["rfa"].items()), results["flax"])
    rows = [[str(p), *(f"{1e6 * results[name][p]:.1f}" for name in built)] for p in positions]
    print(markdown_table(["position", *(f"{name} µs/token" for name in built)], rows))
    verdict = "met" if ratio <= TARGET else "NOT met"
    print(f"\nrfa: time per token at {last} is {ratio:.2f}x its time at {first} (target <= {TARGET}x: {verdict}).")
    for name in (n for n in STATE_LAYERS if n in built):
        print(f"{name}: {last} vs {first}: {flat[name]:.2f}x.")
    print("checks / unchecked at " + f"{first}: " + ", ".join(f"{n} {c:.2f}" for n, c in checks_cost.items()))
    print(
        f"rfa is faster than Flax's softmax cache from position {faster_from} on."
        if faster_from
        else "rfa is not faster than Flax's softmax cache at any measured position."
    )
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_flax_decoding.json")
    figure = output.removesuffix(".json") + ".png"
    data = {
        "layer": f"self-attention, {_FEATURES.value} features, {_HEADS.value} heads, batch {_BATCH.value}; "
        f"rfa: positive, m = {_NUM_FEATURES.value}; deltanet, gated_deltanet, kda, gla: rfa.nnx's layers (gla: elu)",
        "environment": environment(),
        "seconds_per_token": {name: {str(p): t for p, t in times.items()} for name, times in results.items()},
        f"rfa_ratio_{last}_vs_{first}": ratio,
        "rfa_faster_from_position": faster_from,
        "ratios": {"last_vs_first": flat, "checks_over_unchecked": checks_cost},
        "guard_tolerance": GUARD_TOLERANCE,
        "figure": figure,
    }
    write_json(output, data)
    warn_against_committed(output, data)
    draw(data, figure)
    print(f"\nwrote {output} and {figure}")


if __name__ == "__main__":
    run_main(main)
