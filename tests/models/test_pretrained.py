"""The pretrained families from their Hugging Face layout against transformers' own models (tests/fixtures/hf/<family>,
made by tools/hf_fixtures.py: a tiny random checkpoint in bfloat16 and what transformers computed with it in float32):
Qwen3 (``Qwen3ForCausalLM``: heads wider than hidden_size / heads), Qwen3.5's text decoder (``Qwen3_5ForCausalLM``:
three Gated DeltaNet layers with grouped value heads, then gated attention with partial rotary positions) and
Qwen3-Next (``Qwen3NextForCausalLM``: the same with projections fused per key-head group, and a mixture of four
experts with a gated shared expert at three of its four layers), Qwen3.5 MoE (``Qwen3_5MoeForCausalLM``: Qwen3.5's
layers with such a mixture at every layer), and Kimi Linear (``KimiLinearForCausalLM``: three
KDA layers, then multi-head latent attention without rotary positions, and DeepSeek-V3's router, sigmoid scores with a
correction bias over two groups of experts, at three layers). Logits,
greedy generations (a left-padded batch too), the writer's round trip, the loader's refusals, and the checkpoint's
projections under another attention kind."""

import json
import pathlib
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import run_on_devices
from model_helpers import decode_step, forward, packed_and_alone

import rfa
from rfa.models import Site, decoding, from_pretrained, save_pretrained
from rfa.models.safetensors import iter_checkpoint, read_tensor, write_tensors

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
FAMILIES = ["qwen3", "qwen3_5", "qwen3_5_moe", "qwen3_next", "kimi_linear"]
FIXTURE = FIXTURES / "qwen3"  # the loader's and writer's representative
EXPECTED = {family: np.load(FIXTURES / family / "expected.npz") for family in FAMILIES}
LOADED = {}


def loaded(family: str):
    """The family's fixture model, loaded once per test process."""
    if family not in LOADED:
        LOADED[family] = from_pretrained(str(FIXTURES / family))
    return LOADED[family]


@pytest.fixture(scope="module")
def model():
    return loaded("qwen3")


def relative(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_logits_are_transformers_logits(family):
    expected = EXPECTED[family]
    logits = nnx.jit(lambda model, tokens: model(tokens))(loaded(family), jnp.asarray(expected["tokens"]))
    assert logits.dtype == jnp.float32 and relative(logits, expected["logits"]) < 2e-5


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_the_greedy_generations_are_transformers_own_a_left_padded_batch_too(family):
    """Prompts of 7 and 4 tokens, the second left-padded: the padded rows' logits at their tokens, and both rows'
    tokens. A row's padding shifts its rotary positions, which enter attention only by their differences, and the
    linear layers leave padding out of their state and convolution (transformers zeroes it: the same state)."""
    model, expected = loaded(family), EXPECTED[family]
    padded, mask = jnp.asarray(expected["padded"]), expected["padded_mask"]
    assert relative(np.asarray(model(padded))[mask], expected["padded_logits"][mask]) < 2e-5
    tokens, logits = decoding.generate(model, padded, max_new_tokens=8)
    np.testing.assert_array_equal(tokens, expected["padded_greedy"])
    whole = model(jnp.concatenate([padded, tokens[:, :-1]], axis=1))[:, padded.shape[1] - 1 :]
    assert relative(logits, np.asarray(whole)) < 2e-5  # prefill and decoding: the full pass


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_save_pretrained_writes_the_checkpoint_read(family, tmp_path):
    model, fixture, expected = loaded(family), FIXTURES / family, EXPECTED[family]
    save_pretrained(model, str(tmp_path))
    ours = {name: read_tensor(path, entry) for name, path, entry in iter_checkpoint(str(tmp_path))}
    theirs = {name: read_tensor(path, entry) for name, path, entry in iter_checkpoint(str(fixture))}
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():  # bfloat16 there, float32 here: the same values
        np.testing.assert_array_equal(ours[name], value.astype(np.float32), err_msg=name)
    written = json.loads((tmp_path / "config.json").read_text())
    read = json.loads((fixture / "config.json").read_text())
    assert {k: v for k, v in written.items() if k != "torch_dtype"} == {
        k: read[k] for k in written if k != "torch_dtype"
    }
    again = from_pretrained(str(tmp_path))
    tokens = jnp.asarray(expected["tokens"])
    np.testing.assert_array_equal(again(tokens), model(tokens))


def _copy(tmp_path, config=None, tensors=None, family="qwen3") -> str:
    """A fixture's directory with ``config`` fields set (None: removed) and ``tensors`` replaced or added."""
    directory = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / family, directory)
    hf = json.loads((directory / "config.json").read_text())
    for key, value in (config or {}).items():
        hf.pop(key) if value is None else hf.__setitem__(key, value)
    (directory / "config.json").write_text(json.dumps(hf))
    if tensors is not None:
        weights = {name: read_tensor(path, entry) for name, path, entry in iter_checkpoint(str(directory))}
        for name, value in tensors.items():
            weights.pop(name) if value is None else weights.__setitem__(name, value)
        write_tensors(str(directory / "model.safetensors"), weights)
    return str(directory)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "tensors", "message"),
    [
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, None, "RoPE variant 'yarn'"),
        ({"use_sliding_window": True}, None, "sliding-window layers"),
        ({"layer_types": ["full_attention"] * 3 + ["sliding_attention"]}, None, "sliding-window layers"),
        ({"qk_layernorm_type": "l2"}, None, "sets ['qk_layernorm_type']"),
        ({"model_type": "llama"}, None, "model_type 'llama' is not a registered family"),
        (None, {"model.layers.1.self_attn.q_norm.weight": np.ones(16, np.float32)}, "q_norm.weight' has shape (16,)"),
        (None, {"model.layers.3.mlp.up_proj.weight": None}, "lacks ['model.layers.3.mlp.up_proj.weight']"),
        (None, {"model.layers.4.mlp.up_proj.weight": np.ones((96, 64), np.float32)}, "has no place"),
    ],
    ids=["rope", "sliding_window", "layer_types", "unknown_field", "family", "shape", "missing", "extra"],
)
def test_the_loader_refuses_what_it_does_not_reproduce_by_name(tmp_path, config, tensors, message):
    with pytest.raises(rfa.InputError, match=re.escape(message)):
        from_pretrained(_copy(tmp_path, config, tensors))


@pytest.mark.slow
def test_qwen3_5_reads_the_vision_grids_rotary_layout_as_inert_and_refuses_another_rope_field(tmp_path):
    """Text positions are one grid of Qwen3.5's multimodal rotary layout (``mrope_section``), so it changes no
    logit; a rotary field rfa does not know is refused."""
    rope = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}
    layout = {"rope_parameters": {**rope, "mrope_section": [11, 11, 10], "mrope_interleaved": True}}
    model, expected = from_pretrained(_copy(tmp_path / "a", layout, family="qwen3_5")), EXPECTED["qwen3_5"]
    assert relative(model(jnp.asarray(expected["tokens"])), expected["logits"]) < 2e-5
    unknown = {"rope_parameters": {**rope, "beta_fast": 32}}
    with pytest.raises(rfa.InputError, match=re.escape("rope_parameters sets ['beta_fast']")):
        from_pretrained(_copy(tmp_path / "b", unknown, family="qwen3_5"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"attention_bias": True}, "attention_bias (biases on MLA's projections) is not reproduced"),
        ({"num_key_value_heads": 2}, "num_key_value_heads must be the heads'"),
        ({"mla_use_nope": False}, "mla_use_nope = false (rotary positions in MLA) is not reproduced"),
        ({"linear_attn_config": {"kda_layers": [1, 2, 3, 4], "gate_low_rank_dim": 8}}, "sets ['gate_low_rank_dim']"),
        ({"moe_router_activation_func": "softmax"}, "sets ['moe_router_activation_func']"),
    ],
    ids=["attention_bias", "kv_heads", "rotary_mla", "linear_attn_config", "unknown"],
)
def test_kimi_linear_refuses_what_its_mla_and_router_do_not_reproduce(tmp_path, config, message):
    with pytest.raises(rfa.InputError, match=re.escape(message)):
        from_pretrained(_copy(tmp_path, config, family="kimi_linear"))


@pytest.mark.slow
def test_kimi_linear_reads_the_hub_s_config_form(tmp_path):
    """The hub's ``linear_attn_config`` (1-indexed layers) and ``first_k_dense_replace`` in place of transformers'
    ``layer_types`` and ``mlp_layer_types``: the same model."""
    hub = {
        "layer_types": None,
        "mlp_layer_types": None,
        "linear_num_heads": None,
        "linear_head_dim": None,
        "linear_conv_kernel_dim": None,
        "linear_attn_config": {
            "kda_layers": [1, 2, 3],
            "full_attn_layers": [4],
            "num_heads": 4,
            "head_dim": 16,
            "short_conv_kernel_size": 4,
        },
        "first_k_dense_replace": 1,
        "mla_use_nope": True,
    }
    model, expected = from_pretrained(_copy(tmp_path, hub, family="kimi_linear")), EXPECTED["kimi_linear"]
    assert model.config == loaded("kimi_linear").config
    assert relative(model(jnp.asarray(expected["tokens"])), expected["logits"]) < 2e-5


@pytest.mark.slow
def test_a_swapped_attention_keeps_the_checkpoint_s_projections_trains_and_decodes():
    """Qwen3.5's full-attention layer's softmax becomes positive random features (m = 64) on the same q, k, v, gate
    and output projections (and q/k norms), its Gated DeltaNet layers kept: a linearization study's start. At the
    first position, where attention has one key whatever its kernel, the logits are the checkpoint's; a gradient
    step lowers the loss, and it decodes."""
    model, expected = loaded("qwen3_5"), EXPECTED["qwen3_5"]
    swapped = from_pretrained(str(FIXTURES / "qwen3_5"), attention=Site("positive", num_features=64))
    layer = 3  # the full-attention layer
    assert type(swapped.layers[layer].attention.core).__name__ == "KernelizedCore"
    for name in ("query", "key", "value", "gate", "out", "query_norm", "key_norm"):
        a, b = (getattr(m.layers[layer].attention, name) for m in (model, swapped))
        leaf = "kernel" if hasattr(a, "kernel") else "weight"
        np.testing.assert_array_equal(getattr(a, leaf)[...], getattr(b, leaf)[...], err_msg=name)
    tokens = jnp.asarray(expected["tokens"])

    def loss(model):
        logits = model(tokens)
        first = logits[:, 0]  # the checkpoint's: one key
        nll = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits[:, :-1]), tokens[:, 1:, None], -1))
        return nll, first

    step = nnx.jit(nnx.value_and_grad(loss, has_aux=True))
    (before, first), grads = step(swapped)
    assert relative(first, expected["logits"][:, 0]) < 2e-5
    nnx.update(swapped, jax.tree.map(lambda p, g: p - 0.05 * g, nnx.state(swapped, nnx.Param), grads))
    assert step(swapped)[0][0] < before
    generated, _ = decoding.generate(swapped, jnp.asarray(expected["prompt"]), max_new_tokens=4)
    assert generated.shape == (1, 4)


def test_bad_tokens_masks_and_positions_are_refused_under_jit_too(model):
    run, step = rfa.checks.checked(forward), rfa.checks.checked(decode_step)
    for bad in ([[3, 256]], [[3, -1]]):
        with pytest.raises(rfa.InputError, match=r"ids outside \[0, 256\)"):
            run(model, jnp.array(bad))
    _, cache = model.prefill(jnp.array([[3, 4]]), max_length=3)
    with pytest.raises(rfa.InputError, match=r"position 3 is outside the cache's slots \[0, 3\)"):
        step(model, jnp.array([5]), cache, jnp.asarray(3), None)
    with pytest.raises(rfa.InputError, match="key_mask must be a boolean array"):
        model(jnp.array([[3, 4]]), key_mask=jnp.ones((1, 3), bool))
    with pytest.raises(rfa.InputError, match="additive mask"):
        model(jnp.array([[3, 4]]), key_mask=jnp.zeros((1, 2)))


@pytest.mark.parametrize("family", ["qwen3_5", pytest.param("kimi_linear", marks=pytest.mark.slow)])
def test_a_packed_row_through_a_family_is_each_sequence_alone(family):
    """Three sequences in one row (``segment_ids``): the Gated DeltaNet or KDA layers' states and convolutions
    restart at each, the gated attention or MLA attends within each."""
    packed, alone = packed_and_alone(loaded(family), (5, 3, 4), 256)
    assert relative(packed, np.asarray(alone)) < 2e-5


@pytest.mark.slow
def test_a_sharded_checkpoint_is_the_one_file(model, tmp_path):
    """``model.safetensors.index.json`` and two shards give the same model."""
    weights = {name: read_tensor(path, entry) for name, path, entry in iter_checkpoint(str(FIXTURE))}
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, members in shards.items():
        write_tensors(str(tmp_path / file), {name: weights[name] for name in members})
    index = {"weight_map": {name: file for file, members in shards.items() for name in members}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    shutil.copy(FIXTURE / "config.json", tmp_path / "config.json")
    tokens = jnp.asarray(EXPECTED["qwen3"]["tokens"])
    np.testing.assert_array_equal(from_pretrained(str(tmp_path))(tokens), model(tokens))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_is_as_far_from_float32_as_transformers_own_bfloat16(family):
    """Computing in bfloat16 (float32 parameters, float32 states and decays in the linear layers): the logits'
    distance from transformers' float32 logits is at most 1.5x that of transformers' own bfloat16 model (the
    checkpoint loaded with ``dtype=torch.bfloat16``: 1.4%, 13%, 7.8%, 10% and 16% of the largest logit for Qwen3,
    Qwen3.5, Qwen3.5 MoE, Qwen3-Next and Kimi Linear; rfa's 1.5%, 16%, 7.4%, 12% and 7.5%, measured 2026-12-08)."""
    expected = EXPECTED[family]
    low = forward(from_pretrained(str(FIXTURES / family), dtype="bfloat16"), jnp.asarray(expected["tokens"]))
    theirs = relative(expected["bfloat16_logits"], expected["logits"])
    assert low.dtype == jnp.float32 and relative(low, expected["logits"]) < 1.5 * theirs


ON_A_MESH = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from flax import nnx
from rfa.models import from_pretrained
from rfa.train import make_mesh

mesh, result = make_mesh(2, model=2, sequence=2), {}
for directory in sys.argv[1:]:
    tokens = jnp.asarray(np.load(directory + "/expected.npz")["tokens"])
    one, sharded = from_pretrained(directory), from_pretrained(directory, mesh=mesh)
    params = [nnx.to_flat_state(nnx.state(m, nnx.Param)) for m in (one, sharded)]
    with jax.set_mesh(mesh):
        batch = jax.device_put(tokens, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data")))
        logits = nnx.jit(lambda model, tokens: model(tokens))(sharded, batch)
    reference = one(tokens)
    result[directory] = {
        "relative": float(jnp.max(jnp.abs(logits - reference)) / jnp.max(jnp.abs(reference))),
        "equal": all(bool(np.array_equal(a[...], b[...])) for (_, a), (_, b) in zip(*params, strict=True)),
        "split": sorted(".".join(map(str, p)) for p, v in params[1] if "model" in str(v[...].sharding.spec)),
        "devices": len(logits.sharding.device_set),
    }
print(json.dumps(result))
"""


@pytest.mark.slow
def test_loading_on_a_mesh_of_8_devices_is_loading_on_one():
    """``from_pretrained(mesh=)`` on (data 2, sequence 2, model 2) CPU devices, Qwen3.5 MoE (Gated DeltaNet, gated
    attention, experts and a gated shared expert at every layer): the same parameter values, the heads, the gate's
    heads and the hidden units (every expert's, the shared expert's) split over ``model``, and the logits of one
    device's model (to float32's reordered sums)."""
    directory = str(FIXTURES / "qwen3_5_moe")
    loaded_there = run_on_devices(ON_A_MESH, directory)[directory]
    assert loaded_there["equal"] and loaded_there["devices"] == 8
    assert loaded_there["relative"] < 2e-5
    split = {
        "layers.3.attention.query.kernel",
        "layers.3.attention.gate.kernel",
        "layers.3.attention.out.kernel",
        "layers.0.mlp.up",
        "layers.0.mlp.down",
        "layers.0.mlp.shared.gate.kernel",
    }
    assert split <= set(loaded_there["split"])
