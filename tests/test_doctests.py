"""Every docstring example runs (doctest), in a namespace holding what the examples import by convention.

Examples are written to be run: they build what they use. ``# doctest: +SKIP`` marks the few that
need data or a trained run the project cannot ship with a docstring.
"""

import doctest
import importlib
import importlib.util
import pathlib
import pkgutil

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import rfa


def _modules(package) -> list[str]:
    return [name for _, name, _ in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


def _defines_flags(name: str) -> bool:
    """A command line defines its absl flags on import: two of them cannot be imported into one process."""
    source = pathlib.Path(importlib.util.find_spec(name).origin).read_text()
    return "flags.DEFINE_" in source


MODULES = sorted(name for name in _modules(rfa) if not _defines_flags(name) and not name.endswith("__main__"))
NAMESPACE = {"rfa": rfa, "jax": jax, "jnp": jnp, "np": np, "nnx": nnx, "flax": flax}
# Examples that train, decode, build models or attend under several masks (over 4 s each): in the slow tier.
SLOW = {
    "rfa.train.loop",
    "rfa.models.transformer",
    "rfa.models.decoding",
    "rfa.models.qwen3",
    "rfa.models.causal_lm",
    "rfa.models.qwen3_next",
    "rfa.models.kimi_linear",
    "rfa.models.pretrained",
    "rfa.layers.multi_head",
    "rfa.tasks.batches",
    "rfa.attention.kernelized.api",
    "rfa.layers.attention_fn",
    "rfa.layers.linen_state_layers",
    "rfa.attention.naive",
    "rfa.models.swin",
    "rfa.models.vision",
    "rfa.models.forecaster",
    "rfa.experiments.sweep_framework.runner",
    "rfa.configs.common",
    "rfa.data.pipeline",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in MODULES])
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    failed, _ = doctest.testmod(module, extraglobs=dict(NAMESPACE), optionflags=flags, report=True)
    assert failed == 0, f"{failed} docstring example(s) of {name} failed; see the output above"
