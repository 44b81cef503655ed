from __future__ import annotations

import contextlib
import os
import time

import jax
import jax.numpy as jnp
import optax
from absl import flags
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.benchmarks.scaling import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.scaling.report import figure, table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import loglog_figure, output_path, write_json
from rfa.experiments.common.timing import crossover, environment, memory_bytes, slope, timing_summary
from rfa.models import Decoder, Encoder, Site, TransformerConfig
from rfa.train.sharding import SEQUENCE_AXIS, make_mesh

_LENGTHS = flags.DEFINE_list(
    "lengths", ["128", "256", "512", "1024", "2048", "4096", "8192", "16384", "32768"], "Sequence lengths L."
)
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed steps per case (median reported).")
_MAX_MEMORY = flags.DEFINE_float("max_memory_gib", 8.0, "Skip a case whose estimated peak memory exceeds this.")
_FIT_FROM = flags.DEFINE_integer("fit_from", 2048, "Fit slopes over the lengths from this one on.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON path (figure: .png beside); default <workdir>/benchmark_scaling.json."
)
_WORKDIR = flags.DEFINE_string(
    "workdir", "workdir/benchmarks", "Where the JSON (and figure) go unless --output is given."
)
_KINDS = flags.DEFINE_list(
    "kinds", ["exact", "positive", "gated"], "Kinds to time (of exact, positive, gated); each model times those it has."
)
_NUM_LAYERS = flags.DEFINE_integer(
    "num_layers", 2, "Layers of each model (the decoder's, or the encoder's).", lower_bound=1
)
_SEQUENCE_DEVICES = flags.DEFINE_list(
    "sequence_devices", [], "Device counts P splitting the sequence: per-device memory instead of time."
)
_SEQUENCE_LENGTH = flags.DEFINE_integer("sequence_length", 16384, "L of the per-device memory study.")
_SEQUENCE_OUTPUT = flags.DEFINE_string(
    "sequence_output", None, "JSON of the per-device memory study; default <workdir>/benchmark_sequence_parallel.json."
)

KINDS = {
    "exact": Site(),
    "positive": Site("positive", num_features=64),
    "gated": Site("positive", num_features=64, gated=True),
}
MODELS = {"decoder": ("exact", "positive", "gated"), "encoder": ("exact", "positive")}  # gates need a causal site
flags.register_validator(
    "kinds", lambda kinds: set(kinds) <= set(KINDS), f"each kind must be one of {', '.join(KINDS)}."
)


def timed_models(kinds: list[str]) -> dict[str, tuple[str, ...]]:
    """``MODELS`` with each model's kinds cut to ``kinds`` (``--kinds``): ``["exact", "gated"]`` times the decoder's
    exact and gated steps and the encoder's exact one; a model left with no kind is left out."""
    cut = {model: tuple(kind for kind in own if kind in kinds) for model, own in MODELS.items()}
    return {model: own for model, own in cut.items() if own}


def model_config(model: str, kind: str, length: int, *, sequence_axis: str | None = None) -> TransformerConfig:
    attention = KINDS[kind]
    site = {"decoder_attention" if model == "decoder" else "encoder_attention": attention}
    return TransformerConfig(
        vocab_size=256,
        num_classes=2,
        d_model=64,
        num_heads=4,
        mlp_dim=128,
        num_encoder_layers=_NUM_LAYERS.value,
        num_decoder_layers=_NUM_LAYERS.value,
        dropout_rate=0.0,
        max_length=length,
        sequence_axis=sequence_axis,
        **site,
    )


def train_step(model: str, kind: str, length: int, mesh: jax.sharding.Mesh | None = None):
    """The compiled step, its arguments and its memory analysis; with ``mesh``, the sequence split over its
    ``sequence`` axis (per-device memory)."""
    config = model_config(model, kind, length, sequence_axis=None if mesh is None else SEQUENCE_AXIS)
    network = (Decoder if model == "decoder" else Encoder)(config, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split((network, nnx.Optimizer(network, optax.adam(1e-3), wrt=nnx.Param)))
    tokens = jax.random.randint(jax.random.key(length), (1, length), 1, config.vocab_size)
    labels = tokens if model == "decoder" else jnp.zeros((1,), jnp.int32)
    if mesh is not None:
        split, replicated = (NamedSharding(mesh, spec) for spec in (P(None, SEQUENCE_AXIS), P()))
        state, tokens = jax.device_put(state, replicated), jax.device_put(tokens, split)
        labels = tokens if model == "decoder" else jax.device_put(labels, replicated)

    def step(state, tokens, labels):
        network, optimizer = nnx.merge(graphdef, state)

        def loss(network):
            return optax.softmax_cross_entropy_with_integer_labels(network(tokens), labels).mean()

        value, grads = nnx.value_and_grad(loss)(network)
        optimizer.update(network, grads)
        return nnx.state((network, optimizer)), value

    with contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh):
        compiled = jax.jit(step, donate_argnums=0).lower(state, tokens, labels).compile()
    return compiled, (state, tokens, labels), memory_bytes(compiled)


def sequence_memory(devices: list[int], length: int) -> list[dict]:
    """XLA's per-device peak of the decoder's training step at ``length`` with the sequence split over P devices."""
    if max(devices) > jax.device_count():
        raise ValueError(
            f"--sequence_devices needs {max(devices)} devices, {jax.device_count()} are present; on a CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={max(devices)} before the command."
        )
    rows = []
    for count in devices:
        mesh = make_mesh(1, 1, sequence=count)
        for kind in MODELS["decoder"]:
            _, _, memory = train_step("decoder", kind, length, mesh)
            rows.append({"model": "decoder", "kind": kind, "length": length, "devices": count, "memory": memory})
            print(f"P={count} {kind:9s} per-device peak {memory['peak_bytes'] / 2**20:.1f} MiB", flush=True)
    return rows


def plot_sequence_memory(rows: list[dict], path: str) -> None:
    curves = {}
    for kind in MODELS["decoder"]:
        mine = [r for r in rows if r["kind"] == kind]
        curves[f"decoder {kind}"] = ([r["devices"] for r in mine], [r["memory"]["peak_bytes"] / 2**20 for r in mine])
    title = f"training step, L = {rows[0]['length']}"
    loglog_figure(
        curves,
        path,
        xlabel="devices splitting the sequence (P)",
        ylabel="per-device peak (MiB, XLA estimate)",
        title=title,
    )


def measure(model: str, kind: str, length: int) -> dict:
    compiled, (state, tokens, labels), memory = train_step(model, kind, length)
    result = {"model": model, "kind": kind, "length": length, "memory": memory}
    if memory is not None and memory["peak_bytes"] > _MAX_MEMORY.value * 2**30:
        return {**result, "skipped": f"estimated peak {memory['peak_bytes'] / 2**30:.1f} GiB"}
    state, loss = compiled(state, tokens, labels)  # warm-up
    jax.block_until_ready(loss)
    seconds = []
    for _ in range(_REPEATS.value):  # the state is donated: each step takes the previous one's
        start = time.perf_counter()
        state, loss = compiled(state, tokens, labels)
        jax.block_until_ready(loss)
        seconds.append(time.perf_counter() - start)
    return {**result, **timing_summary(seconds)}


def summarize(results: list[dict], fit_from: int, models: dict[str, tuple[str, ...]] = MODELS) -> dict:
    """Per model and kind of ``models``: the fitted slopes of time and memory; per kernelized kind: the crossover
    length."""
    summary = {}
    for model, kinds in models.items():
        for kind in kinds:
            rows = [r for r in results if r["model"] == model and r["kind"] == kind and "median_ms" in r]
            fitted = [r for r in rows if r["length"] >= fit_from]
            summary[f"{model}/{kind}"] = {
                "time_slope": slope([(r["length"], r["median_ms"]) for r in fitted]),
                "memory_slope": slope([(r["length"], r["memory"]["peak_bytes"]) for r in fitted if r["memory"]]),
                "longest": max((r["length"] for r in rows), default=None),
            }
        exact = {r["length"]: r.get("median_ms") for r in results if r["model"] == model and r["kind"] == "exact"}
        for kind in (kind for kind in kinds if kind != "exact"):
            rows = [
                (r["length"], r["median_ms"])
                for r in results
                if r["model"] == model and r["kind"] == kind and "median_ms" in r
            ]
            summary[f"{model}/{kind}"]["faster_than_exact_from"] = crossover(rows, exact)
    return summary


def main(argv):
    del argv
    env = environment()
    print(f"backend {env['backend']} ({env['device_kind']}), jax {env['jax_version']}", flush=True)
    if _SEQUENCE_DEVICES.value:
        rows = sequence_memory([int(x) for x in _SEQUENCE_DEVICES.value], _SEQUENCE_LENGTH.value)
        output = output_path(_SEQUENCE_OUTPUT.value, _WORKDIR.value, "benchmark_sequence_parallel.json")
        write_json(output, {"environment": env, "results": rows})
        plot_sequence_memory(rows, os.path.splitext(output)[0] + ".png")
        print(f"\nwrote {output}")
        return
    results, models = [], timed_models(_KINDS.value)
    for length in (int(x) for x in _LENGTHS.value):
        for model, kinds in models.items():
            for kind in kinds:
                result = measure(model, kind, length)
                results.append(result)
                shown = f"{result['median_ms']:.1f} ms" if "median_ms" in result else f"skipped ({result['skipped']})"
                print(f"L={length:6d} {model:8s} {kind:9s} {shown}", flush=True)
    summary = summarize(results, _FIT_FROM.value, models)
    print("\n" + table(results))
    for name, fit in summary.items():
        print(f"{name}: {fit}")
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_scaling.json")
    data = {"environment": env, "fit_from": _FIT_FROM.value, "results": results, "summary": summary}
    write_json(output, data)
    warn_against_committed(output, data)
    figure(data, os.path.splitext(output)[0] + ".png")
    print(f"\nwrote {output}")


if __name__ == "__main__":
    run_main(main)
