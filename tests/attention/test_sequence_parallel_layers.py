"""The delta-rule layers split along L on 8 CPU devices equal the same layers on one device.

One subprocess with ``--xla_force_host_platform_device_count=8``: ``rfa.nnx.GatedDeltaNet`` (grouped value heads, a
convolution bias) and ``rfa.nnx.KimiDeltaAttention`` with ``sequence_axis``, under ``jax.set_mesh`` with inputs
sharded along L and Flax's causal ∧ padding mask, where padding crosses device boundaries and two devices' blocks
hold padding alone (so a block's convolution history comes from blocks further back). Outputs, the returned state
and convolution history, and the gradients of a loss of all three (the inputs' and every parameter's); then the
layer called inside the user's own ``jax.shard_map`` (default ``check_vma``); then rfa's decoders of both kinds with
``sequence_axis`` on a mesh of Auto axes (rfa.train's), whose logits equal the unsplit model's."""

import pytest
from helpers import run_on_devices

CHECKS = r"""
import dataclasses, json
import jax, jax.numpy as jnp, numpy as np
from flax import nnx
import rfa

P_ = jax.sharding.PartitionSpec
B, L, D = 2, 32, 32
x = jax.random.normal(jax.random.key(0), (B, L, D))
keep = np.ones((B, L), bool)
keep[0, :5] = False  # left padding across the first boundaries
keep[1, 13:24] = False  # blocks of 4 tokens at 8 devices: tokens 16-23 are two blocks of padding alone
mask = nnx.combine_masks(nnx.make_causal_mask(jnp.ones((B, L))), nnx.make_attention_mask(keep, keep))
LAYERS = {
    "gated_deltanet": lambda axis: rfa.nnx.GatedDeltaNet(2, D, head_dim=8, num_v_heads=4, conv_bias=True, chunk_size=4,
                                                         sequence_axis=axis, rngs=nnx.Rngs(0)),
    "kda": lambda axis: rfa.nnx.KimiDeltaAttention(2, D, chunk_size=4, sequence_axis=axis, rngs=nnx.Rngs(0)),
}


def error(a, b):
    return float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(b)) + 1e-30))


def loss(layer, x):
    out, state = layer.step(x, layer.empty_state(B), mask=mask)
    return jnp.sum(jnp.sin(out)) + jnp.sum(state["state"]) + jnp.sum(state["conv"]), (out, state)


value_and_grad = nnx.jit(nnx.value_and_grad(loss, argnums=(0, 1), has_aux=True))
mesh = jax.make_mesh((8,), ("seq",), axis_types=(jax.sharding.AxisType.Explicit,))
report = {}
for name, make in LAYERS.items():
    (_, (out, state)), (g_layer, g_x) = value_and_grad(make(None), x)
    split = make("seq")
    with jax.set_mesh(mesh):
        (_, (s_out, s_state)), (s_layer, s_x) = value_and_grad(split, jax.reshard(x, P_(None, "seq")))
    params = [jax.tree.leaves(nnx.state(g, nnx.Param)) for g in (g_layer, s_layer)]
    report[name] = {
        "output": error(s_out, out), "state": error(s_state["state"], state["state"]),
        "conv": error(s_state["conv"], state["conv"]), "grad_x": error(s_x, g_x),
        "grad_params": max(error(a, b) for a, b in zip(params[1], params[0])), "leaves": len(params[0]),
        "split_output": str(s_out.sharding.spec),
    }

graph, weights = nnx.split(LAYERS["gated_deltanet"]("seq"))
reference = LAYERS["gated_deltanet"](None)


def local(weights, x, keep):
    layer = nnx.merge(graph, weights)
    return layer.step(x, layer.empty_state(B), mask=nnx.make_attention_mask(keep, keep))


auto = jax.make_mesh((8,), ("seq",), axis_types=(jax.sharding.AxisType.Auto,))
tokens = P_(None, "seq")
out, state = jax.jit(jax.shard_map(local, mesh=auto, in_specs=(P_(), tokens, tokens), out_specs=(tokens, P_())))(
    weights, x, jnp.asarray(keep)
)
expected, expected_state = nnx.jit(lambda layer, x, keep: layer.step(
    x, layer.empty_state(B), mask=nnx.make_attention_mask(keep, keep)))(reference, x, jnp.asarray(keep))
report["inside_shard_map"] = {"output": error(out, expected), "state": error(state["state"], expected_state["state"]),
                              "conv": error(state["conv"], expected_state["conv"])}
from rfa.models import Site, Decoder, preset

tokens_in = jax.random.randint(jax.random.key(1), (B, L), 1, 50)
for kind in ("gated_deltanet", "kda"):
    config = preset("tiny", vocab_size=50, decoder_attention=Site(kind, chunk_size=4))
    expected = Decoder(config, rngs=nnx.Rngs(0))(tokens_in)
    model = Decoder(dataclasses.replace(config, sequence_axis="seq"), rngs=nnx.Rngs(0))
    with jax.set_mesh(auto):  # Auto axes, as rfa.train's mesh: XLA lays out what the split does not
        ids = jax.device_put(tokens_in, jax.sharding.NamedSharding(auto, P_(None, "seq")))
        logits = nnx.jit(lambda model, ids: model(ids))(model, ids)
    report[f"model_{kind}"] = error(logits, expected)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_the_delta_rule_layers_split_along_the_sequence_equal_one_device():
    report = run_on_devices(CHECKS)
    for name in ("gated_deltanet", "kda"):
        errors = report[name]
        assert max(errors[key] for key in ("output", "state", "conv", "grad_x", "grad_params")) < 1e-5, errors
        assert errors["leaves"] > 10 and "seq" in errors["split_output"], errors
    assert max(report["inside_shard_map"].values()) < 1e-5, report["inside_shard_map"]
    assert report["model_gated_deltanet"] < 1e-5 and report["model_kda"] < 1e-5, report
