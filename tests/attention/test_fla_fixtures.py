"""rfa's delta-rule layers against flash-linear-attention 0.6's own: the fixtures that ``tools/fla_fixtures.py``
made with PyTorch on the CPU and fla's Triton kernels in Triton's interpreter (``tests/fixtures/fla/``; the suite
needs neither). Each rfa layer is built from fla's arguments (:func:`rfa.nnx.from_fla_layer`), takes fla's state
dict with its options (:func:`rfa.nnx.load_fla_state_dict` with ``config``), and gives fla's outputs over padded
rows; a generation started in fla goes on in rfa from fla's cache (:func:`rfa.nnx.cache_from_fla`), and rfa's cache
after the prompt is fla's (:func:`rfa.nnx.cache_to_fla`)."""

import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered

import rfa

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "fla"
CASES = sorted(path.stem for path in FIXTURES.glob("*.npz"))


def test_the_fixtures_are_there():
    assert CASES == ["deltanet", "gated_deltanet", "gated_deltanet_sigmoid_gate", "kda", "kda_safe_gate"]


def _load(case):
    fixture = dict(np.load(FIXTURES / f"{case}.npz"))
    arguments = json.loads(str(fixture["arguments"]))
    fla_layer = arguments.pop("layer")
    layer = rfa.nnx.from_fla_layer(fla_layer, {"hidden_size": 32, **arguments}, chunk_size=4, rngs=nnx.Rngs(0))
    weights = {name[len("weight/") :]: value for name, value in fixture.items() if name.startswith("weight/")}
    rfa.nnx.load_fla_state_dict(layer, weights, config={"layer": fla_layer, "hidden_size": 32, **arguments})
    return layer, fixture


@nnx.jit
def _apply(layer, x, mask):
    return layer(x, mask=mask)


@nnx.jit
def _step(layer, x, cache):
    return layer.step(x, cache)


@pytest.mark.parametrize("case", tiered(CASES, {"kda", "gated_deltanet_sigmoid_gate"}))
def test_the_layer_is_fla_s_layer_and_continues_fla_s_cache(case):
    layer, f = _load(case)
    keep = f["mask"].astype(bool)
    out = _apply(layer, jnp.asarray(f["x"]), nnx.make_attention_mask(keep, keep))
    np.testing.assert_allclose(out, f["out"], rtol=1e-4, atol=1e-4)

    fla_cache = {"recurrent_state": f["cache/recurrent_state"]}
    conv = tuple(f[f"cache/conv_{n}"] for n in "qkv") if "cache/conv_q" in f else None
    prompt_out, cache = _step(layer, jnp.asarray(f["prompt"]), layer.empty_state(2))
    np.testing.assert_allclose(prompt_out, f["prompt_out"], rtol=1e-4, atol=1e-4)
    mine = rfa.nnx.cache_to_fla(layer, cache)  # rfa's cache, in fla's layout, is fla's
    np.testing.assert_allclose(mine["recurrent_state"], fla_cache["recurrent_state"], rtol=1e-4, atol=1e-5)
    if conv is not None:  # fla keeps one input more, the oldest, which no later output reads
        for ours, theirs in zip(mine["conv_state"], conv, strict=True):
            np.testing.assert_allclose(ours[..., 1:], theirs[..., 1:], rtol=1e-5, atol=1e-6)

    cache = rfa.nnx.cache_from_fla(layer, fla_cache["recurrent_state"], conv)  # fla's generation goes on in rfa
    pieces = []
    for t in range(3):
        piece, cache = _step(layer, jnp.asarray(f["next"][:, t : t + 1]), cache)
        pieces.append(piece)
    np.testing.assert_allclose(jnp.concatenate(pieces, 1), f["next_out"], rtol=1e-4, atol=1e-4)


def test_a_state_dict_of_other_options_is_refused_by_name_given_fla_s_config():
    """A safe-gate KDA's state dict has a plain KDA's names and shapes: without the config it loads into a plain
    layer; with fla's config it is refused, and the option named."""
    f = dict(np.load(FIXTURES / "kda_safe_gate.npz"))
    weights = {name[len("weight/") :]: value for name, value in f.items() if name.startswith("weight/")}
    plain = rfa.nnx.KimiDeltaAttention(2, 32, head_dim=8, rngs=nnx.Rngs(0))
    rfa.nnx.load_fla_state_dict(plain, weights)  # loads: nothing in the weights tells
    config = {"model_type": "kda", "hidden_size": 32, "num_heads": 2, "head_dim": 8, "safe_gate": True,
              "lower_bound": -5.0, "vocab_size": 100, "attn_mode": "chunk"}  # fmt: skip
    with pytest.raises(rfa.InputError, match=r"built with safe_gate=True \(the layer's False\), lower_bound=-5.0"):
        rfa.nnx.load_fla_state_dict(plain, weights, config=config)
    rfa.nnx.load_fla_state_dict(rfa.nnx.from_fla_config(config, rngs=nnx.Rngs(0)), weights, config=config)
    with pytest.raises(rfa.InputError, match=r"GatedDeltaNet with \['use_output_norm'\]: rfa's GatedDeltaNet does not"):
        rfa.nnx.from_fla_layer(
            "GatedDeltaNet", {"hidden_size": 32, "num_heads": 2, "use_output_norm": False}, rngs=nnx.Rngs(0)
        )
    with pytest.raises(rfa.InputError, match=r"KimiDeltaAttention: lower_bound and safe_gate|safe_gate"):
        rfa.nnx.GatedDeltaNet(2, 32, lower_bound=-5.0, rngs=nnx.Rngs(0))
