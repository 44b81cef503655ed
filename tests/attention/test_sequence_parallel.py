"""Sequence-parallel kernelized attention on 8 CPU devices equals the single-device computation.

JAX fixes its device count at start-up, so the checks run in one subprocess with
``--xla_force_host_platform_device_count=8`` and report their largest errors as JSON; the single-device
``rfa.kernelized_attention`` they are held to is itself held to the float64 reference
(test_against_references.py). Outputs, gradients (q, k, v, log_decay) and the returned state, for P = 2 and 8
devices (one boundary; blocks of 4 tokens, the padding across several: P = 4 added nothing these two miss and a
third of the subprocess's time), bidirectional, causal and causal with decay (one per token, or one per feature),
with key padding that spans device boundaries and an initial state; and the gated delta rule
(a decay per token, or per key channel: KDA) split over 2 and 8 devices.
The file is in the fast tier: its one subprocess (about 30 s) is the only test that runs the sequence-parallel code,
so without it `make test-fast` and the mutation tool (tools/mutation_sample.py) would not reach it.
"""

import pytest
from helpers import run_on_devices

CHECKS = r"""
import json
import jax, jax.numpy as jnp, numpy as np
import rfa
from rfa.attention import sequence_parallel_attention

B, L, H, D, M = 2, 32, 2, 8, 16
keys = jax.random.split(jax.random.key(0), 6)
q, k, v = (0.5 * jax.random.normal(key, (B, L, H, D)) for key in keys[:3])
g = -jax.nn.softplus(jax.random.normal(keys[3], (B, L, H)))
per_feature = -jax.nn.softplus(jax.random.normal(keys[3], (B, L, H, M)))  # GLA: one decay per feature
W = rfa.sample_projection(keys[4], M, D)
keep = np.ones((B, L), bool)
keep[0, :5] = False  # left padding, across the first device boundaries at P = 8
keep[1, 15:18] = False  # a hole across the middle boundary
mask = jnp.asarray(keep)[:, None, None, :]
options = dict(estimator="positive", projection=W)
_, initial = rfa.kernelized_attention(k[:, :6] * 2, k[:, :6], v[:, :6], is_causal=True, return_state=True, **options)

def errors(a, b):
    return float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(b)) + 1e-30))

def with_grads(fn):  # the output and state, and the gradients of a loss of the output: one program
    return jax.value_and_grad(lambda *args: (jnp.sum(jnp.sin((r := fn(*args))[0])), r), argnums=(0, 1, 2, 3),
                              has_aux=True)

report = {}
for case, causal, decay, state in (("bidirectional", False, False, None), ("causal", True, False, None),
                                   ("bidirectional_initial_state", False, False, initial),
                                   ("decay", True, True, None), ("decay_initial_state", True, True, initial),
                                   ("feature_decay_initial_state", True, True, initial)):
    decays = per_feature if case.startswith("feature") else g
    def single(q, k, v, g):
        return rfa.kernelized_attention(q, k, v, mask=mask, is_causal=causal, log_decay=g if decay else None,
                                        initial_state=state, return_state=True, **options)
    (_, (ref, ref_state)), ref_grads = with_grads(single)(q, k, v, decays)  # one device, the same for every P
    for P in (2, 8):
        mesh = jax.make_mesh((P,), ("seq",), devices=jax.devices()[:P])
        def parallel(q, k, v, g):
            return sequence_parallel_attention(q, k, v, mesh=mesh, axis="seq", mask=mask, is_causal=causal,
                                               log_decay=g if decay else None, initial_state=state,
                                               return_state=True, **options)
        (_, (out, s)), grads = jax.jit(with_grads(parallel))(q, k, v, decays)
        report[f"{case}/P{P}"] = {
            "output": errors(out, ref), "state": errors(s.value(), ref_state.value()),
            "grads": [errors(a, b) if decay or i < 3 else 0.0 for i, (a, b) in enumerate(zip(grads, ref_grads))],
        }

def message(fn):
    try:
        fn()
    except ValueError as error:
        return str(error)
    return None

mesh = jax.make_mesh((8,), ("seq",))
with jax.set_mesh(mesh):  # mesh=None: the set mesh shards unsharded inputs itself
    out = jax.jit(lambda q: sequence_parallel_attention(q, k, v, axis="seq", is_causal=True, **options))(q)
report["set_mesh"] = errors(out, rfa.kernelized_attention(q, k, v, is_causal=True, **options))
params = {"sigma": 0.5 + jax.random.uniform(keys[5], (H, 1, D)),  # the rfa map's: one per head, replicated
          "key_log_weight": jax.nn.log_sigmoid(jax.random.normal(keys[4], (B, H, L)))}  # one per key: split
rfa_options = dict(estimator="rfa", projection=W, feature_params=params)
split = jax.jit(lambda q: sequence_parallel_attention(q, k, v, mesh=mesh, axis="seq", is_causal=True,
                                                      **rfa_options))(q)
report["token_params"] = errors(split, rfa.kernelized_attention(q, k, v, is_causal=True, **rfa_options))
from flax import nnx
layer = rfa.nnx.MultiHeadAttention(H, 16, num_features=M, sequence_axis="seq", decode=False, rngs=nnx.Rngs(0))
x = 0.5 * jax.random.normal(keys[5], (B, L, 16))
forward = nnx.jit(lambda layer, x: layer(x, is_causal=True))
alone = forward(layer, x)  # no mesh set: one device
with jax.set_mesh(mesh):
    split = forward(layer, x)
    lowered = jax.jit(lambda x: layer(x, is_causal=True)).lower(x).as_text()
report["layer"] = {"error": errors(split, alone), "collectives": "all_gather" in lowered or "all-gather" in lowered}
valid = jnp.asarray(keep)
linen = rfa.linen.MultiHeadDotProductAttention(num_heads=H, num_features=M, sequence_axis="seq")
variables = linen.init(jax.random.key(1), x)
builders = {"causal_padding": lambda valid: nnx.combine_masks(nnx.make_causal_mask(valid),
                                                              nnx.make_attention_mask(valid, valid)),
            "padding": lambda valid: nnx.make_attention_mask(valid, valid)}
for name, build in builders.items():
    nnx_step = nnx.jit(lambda layer, x, valid: layer(x, mask=build(valid)))
    linen_step = jax.jit(lambda x, valid: linen.apply(variables, x, mask=build(valid)))
    alone = nnx_step(layer, x, valid), linen_step(x, valid)
    with jax.set_mesh(mesh):
        split = nnx_step(layer, x, valid), linen_step(x, valid)
        lowered = jax.jit(lambda x, valid: linen.apply(variables, x, mask=build(valid))).lower(x, valid).as_text()
    report[f"flax_mask/{name}"] = {"nnx": errors(split[0], alone[0]), "linen": errors(split[1], alone[1]),
                                   "collectives": "all_gather" in lowered or "all-gather" in lowered}
linen_causal = linen.clone(is_causal=True)
alone = linen_causal.apply(variables, x)
with jax.set_mesh(mesh):
    report["linen_is_causal"] = errors(jax.jit(lambda x: linen_causal.apply(variables, x))(x), alone)
band = jnp.tril(jnp.triu(jnp.ones((L, L), bool), -3))

def in_set_mesh(fn):
    with jax.set_mesh(mesh):
        return message(fn)

report["errors"] = {
    "indivisible": message(lambda: sequence_parallel_attention(q[:, :30], k[:, :30], v[:, :30], mesh=mesh,
                                                               axis="seq", **options)),
    "positive_decay": message(lambda: sequence_parallel_attention(q, k, v, mesh=mesh, axis="seq", is_causal=True,
                                                                  log_decay=-g, **options)),  # checked before shard_map
    "no_axis": message(lambda: sequence_parallel_attention(q, k, v, mesh=mesh, axis="sequence", **options)),
    "no_axis_set_mesh": in_set_mesh(lambda: sequence_parallel_attention(q, k, v, axis="sequence", **options)),
    "no_mesh": message(lambda: sequence_parallel_attention(q, k, v, axis="seq", **options)),
    "outside_shard_map": message(lambda: rfa.kernelized_attention(q, k, v, sequence_axis="seq", **options)),
    "sliding_window": message(lambda: sequence_parallel_attention(
        q, k, v, mesh=mesh, axis="seq", mask=band, **options)),
    "layer_sliding_window": in_set_mesh(lambda: layer(x, mask=band)),
    # traced: every device's check fails together, so none waits at a collective for the others
    "jitted_layer_sliding_window": in_set_mesh(
        lambda: rfa.checks.checked(nnx.jit(lambda layer, x, m: layer(x, mask=m)))(layer, x, band)),
}
from rfa.attention import delta_rule_attention
unit_q, unit_k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
beta = 2 * jax.nn.sigmoid(v[..., 0])
delta_state = 0.3 * jax.random.normal(keys[5], (B, H, D, D))
tokens = jax.sharding.PartitionSpec(None, "seq")
channel_decay = -jax.nn.softplus(jax.random.normal(keys[5], (B, L, H, D)))  # KDA: one decay per key channel
for P in (2, 8):
    mesh_p = jax.make_mesh((P,), ("seq",), devices=jax.devices()[:P], axis_types=(jax.sharding.AxisType.Auto,))
    def delta(sequence_axis):
        return lambda q, k, v, beta, g: delta_rule_attention(
            q, k, v, beta, log_decay=g, initial_state=delta_state, return_state=True, chunk_size=3,
            sequence_axis=sequence_axis)
    split = jax.shard_map(delta("seq"), mesh=mesh_p, in_specs=(tokens,) * 5,
                          out_specs=(tokens, jax.sharding.PartitionSpec()))  # shard_map's default check_vma
    for name, decays in (("delta_rule", g), ("kda", channel_decay))[: 2 if P == 2 else 1]:
        args = (unit_q, unit_k, v, beta, decays)
        (out, s), (ref, ref_state) = jax.jit(split)(*args), delta(None)(*args)
        report[f"{name}/P{P}"] = {"output": errors(out, ref), "state": errors(s, ref_state)}
        if name == "delta_rule":  # the composition is the same for KDA; its gradients are held on one device
            grads = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.sin(split(*a)[0])), argnums=(0, 1, 2, 3, 4)))(*args)
            ref_grads = jax.grad(lambda *a: jnp.sum(jnp.sin(delta(None)(*a)[0])), argnums=(0, 1, 2, 3, 4))(*args)
            report[f"{name}/P{P}"]["grads"] = [errors(a, b) for a, b in zip(grads, ref_grads)]
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    return run_on_devices(CHECKS)


@pytest.mark.parametrize("devices", [2, 8])
@pytest.mark.parametrize(
    "case",
    [
        "bidirectional",
        "bidirectional_initial_state",
        "causal",
        "decay",
        "decay_initial_state",
        "feature_decay_initial_state",
    ],
)
def test_sequence_parallel_equals_one_device(report, case, devices):
    errors = report[f"{case}/P{devices}"]
    assert errors["output"] < 1e-5 and errors["state"] < 1e-5, errors
    assert max(errors["grads"]) < 1e-5, errors


@pytest.mark.parametrize(("devices", "decay"), [(2, "delta_rule"), (8, "delta_rule"), (2, "kda")])
def test_the_delta_rule_split_over_devices_equals_one_device(report, devices, decay):
    """Outputs and state (replicated: ``out_specs=P()`` under shard_map's default ``check_vma``); gradients for a
    decay per token (KDA's split composes the same per-block affine maps, and its gradients are held to the float64
    recurrence on one device in test_delta_rule.py)."""
    errors = report[f"{decay}/P{devices}"]
    assert errors["output"] < 1e-5 and errors["state"] < 1e-5, errors
    if decay == "delta_rule":
        assert max(errors["grads"]) < 1e-5, errors


def test_sequence_parallel_under_set_mesh_shards_unsharded_inputs(report):
    assert report["set_mesh"] < 1e-5


def test_map_parameters_are_split_with_the_tokens_or_replicated(report):
    """The rfa map's per-key weights travel with their keys; its per-head sigma is on every device."""
    assert report["token_params"] < 1e-5


def test_the_nnx_layer_with_a_sequence_axis_splits_the_sequence_under_set_mesh(report):
    assert report["layer"]["collectives"], "the layer did not run sequence-parallel under jax.set_mesh"
    assert report["layer"]["error"] < 1e-5


def test_sequence_parallel_bad_input_says_what_to_do(report):
    messages = report["errors"]
    assert "must be divisible by the size of mesh axis 'seq' (8)" in messages["indivisible"]
    assert "pad the sequences to a multiple of 8" in messages["indivisible"]
    assert "mesh has no axis 'sequence'; its axes are ('seq',) (the mesh passed as mesh=)" in messages["no_axis"]
    assert "its axes are ('seq',) (the mesh set by jax.set_mesh)" in messages["no_axis_set_mesh"]
    assert "log_decay must be <= 0" in messages["positive_decay"]
    assert "its axes are () (no mesh (pass mesh= or call inside jax.set_mesh))" in messages["no_mesh"]
    assert "sequence_axis='seq' names no mesh axis of an enclosing jax.shard_map" in messages["outside_shard_map"]
    assert "lower-triangular but not causal" in messages["sliding_window"]


def test_a_traced_mask_the_layer_cannot_apply_raises_its_eager_error_on_8_devices(report):
    """Under jax.set_mesh a jitted sequence-parallel layer given a traced sliding-window mask raises the
    InputError of the same call made eagerly (through rfa.checks.checked), instead of one device's failed check
    leaving the other seven waiting at a collective until XLA aborts the process."""
    messages = report["errors"]
    assert "lower-triangular but not causal" in messages["layer_sliding_window"]
    assert messages["jitted_layer_sliding_window"] == messages["layer_sliding_window"]


@pytest.mark.parametrize("mask", ["causal_padding", "padding"])
def test_the_nnx_and_linen_layers_run_sequence_parallel_with_flax_masks(report, mask):
    """Flax's own masks (causal ∧ padding, query ⊗ key padding, built inside the jitted step) through both layers
    on 8 devices equal one device; the Linen layer's is_causal too."""
    errors = report[f"flax_mask/{mask}"]
    assert errors["collectives"], "the Linen layer did not run sequence-parallel under jax.set_mesh"
    assert errors["nnx"] < 1e-5 and errors["linen"] < 1e-5, errors
    assert report["linen_is_causal"] < 1e-5
