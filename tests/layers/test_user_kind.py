"""A kind of the user's own: one module that defines its options and its core and registers it, then runs in a layer,
trains a step in a model config, decodes through its cache, is a variant of a training config and a pair of a study,
with no edit of rfa. The toy kind is temperature-scaled softmax attention, ``softmax(q·k / (τ √d)) v``: the worked
example of docs/development.md, read from the page.
"""

import importlib.util
import pathlib
import re
import sys

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from helpers import normal, own_kinds
from model_helpers import VOCAB, forward, next_token_step, step_by_step, tokens

import rfa
from rfa.layers import SiteWidths, attention_kind, registered_variants
from rfa.models import Decoder, Site, preset

DEVELOPMENT = pathlib.Path(__file__).parents[2] / "docs" / "development.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", DEVELOPMENT.read_text(), re.MULTILINE | re.DOTALL)
USER_MODULE = next(block for block in BLOCKS if block.startswith("# temperature_kind.py\n"))
"""The worked example of docs/development.md, "Where things go": the user's module, as the page shows it."""
USING_IT = BLOCKS[BLOCKS.index(USER_MODULE) + 1]
"""The page's next block: a model whose site names the kind."""


@pytest.fixture
def user_kind(tmp_path, monkeypatch):
    """The user's module, imported from its own file (as ``config.modules`` imports one), its kind forgotten after."""
    path = tmp_path / "temperature_kind.py"
    path.write_text(USER_MODULE)
    spec = importlib.util.spec_from_file_location("temperature_kind", path)
    module = importlib.util.module_from_spec(spec)
    with own_kinds():
        spec.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, "temperature_kind", module)
        yield module


def reference(x, layer, temperature):
    """softmax(q·k / (τ √d)) v through the layer's own projections, in NumPy float64."""
    params = {name: np.asarray(getattr(layer, name).kernel[...], np.float64) for name in ("query", "key", "value")}
    bias = {name: np.asarray(getattr(layer, name).bias[...], np.float64) for name in ("query", "key", "value")}
    q, k, v = (np.einsum("bld,dhe->blhe", x, params[n]) + bias[n] for n in ("query", "key", "value"))
    logits = np.einsum("bqhe,bkhe->bhqk", q, k) / (temperature * np.sqrt(q.shape[-1]))
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhe->bqhe", weights, v)
    kernel, out_bias = np.asarray(layer.out.kernel[...], np.float64), np.asarray(layer.out.bias[...], np.float64)
    return np.einsum("bqhe,hed->bqd", out, kernel) + out_bias


def test_a_kind_of_the_users_runs_in_a_layer_against_its_formula(user_kind):
    entry = attention_kind("temperature_softmax")
    assert (entry.cache, entry.causal_only) == ("length", False) and "temperature_softmax" in registered_variants()
    site = Site("temperature_softmax", temperature=3.0)
    layer = entry.layer(SiteWidths(16, 2), site.options, causal=False, cross=False, rngs=nnx.Rngs(0))
    x = normal(0, (2, 5, 16))
    positions = jnp.broadcast_to(jnp.arange(5), (2, 5))
    call = nnx.jit(
        lambda layer, x: layer(x, key_mask=jnp.ones((2, 5), bool), q_positions=positions, k_positions=positions)
    )
    np.testing.assert_allclose(call(layer, x), reference(np.float64(x), layer, 3.0), rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match=r"kind 'temperature_softmax' has no option \['window'\]"):
        Site("temperature_softmax", window=4)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        Site("temperature_softmax", temperature=0.0)
    page = {}
    exec(USING_IT, page)  # the page's model: its decoder's sites are the kind at τ = 3
    assert page["model"].config.decoder_attention.options.temperature == 3.0


def test_a_kind_of_the_users_trains_a_step_in_a_model_and_decodes_through_its_cache(user_kind):
    config = preset("tiny", vocab_size=VOCAB, max_length=16, decoder_attention=Site("temperature_softmax"))
    model = Decoder(config, rngs=nnx.Rngs(0))
    sequence = tokens(1, (2, 8))
    np.testing.assert_allclose(step_by_step(model, sequence), forward(model, sequence), rtol=2e-4, atol=2e-4)
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    first, second = next_token_step(model, optimizer, sequence), next_token_step(model, optimizer, sequence)
    assert np.isfinite(first) and second < first  # the step trained the kind's projections


def test_a_kind_of_the_users_is_a_training_configs_variant(user_kind):
    from rfa.train import ATTENTION_VARIANTS, check_config, model_config, task_config

    assert ATTENTION_VARIANTS["temperature_softmax"] == {"kind": "temperature_softmax"}
    config = task_config("sort", "temperature_softmax,quick")
    sites = model_config(config, check_config(config))
    assert {sites.encoder_attention.kind, sites.decoder_attention.kind, sites.cross_attention.kind} == {
        "temperature_softmax"
    }
    assert rfa.train.results.recorded_num_features(config.attention) is None  # the kind has no size option


def test_a_kind_of_the_users_is_a_pair_of_the_kernel_comparison_study(user_kind):
    from rfa.configs.studies.compare_kernels import get_config
    from rfa.experiments.common.study_settings import pair_config, pairs
    from rfa.experiments.common.styles import styles
    from rfa.train import check_config, model_config

    comparison = get_config("quick")
    comparison.attention = ("exact", "temperature_softmax")
    assert pairs(comparison) == [("sort", "exact"), ("sort", "temperature_softmax")]
    config = pair_config(comparison, "sort", "temperature_softmax")
    assert model_config(config, check_config(config)).decoder_attention == Site("temperature_softmax")
    assert styles(comparison.attention)["temperature_softmax"] != styles(comparison.attention)["exact"]
