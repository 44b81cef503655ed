"""Hugging Face checkpoints: a directory of ``config.json`` and ``*.safetensors`` as an rfa model, and back.

A family is one registry entry (:class:`Family`), registered in the module that defines its model (``"qwen3"``:
:mod:`rfa.models.qwen3`), keyed by the ``model_type`` of its ``config.json``: how that config becomes the family's
config (refusing, by name, any field whose value the model does not reproduce), and where each of the checkpoint's
tensors goes in the model. :func:`from_pretrained` builds the model's structure without its values, then reads the
tensors one at a time into it (the rest of its state, such as a kernelized site's random projection, initialized as
the model's constructor does), so that the weights are not held twice (but for a mixture's stacked experts, assembled
in NumPy and then moved); a tensor it has no place for, a place no tensor fills and a shape that differs are refused
by name.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rfa._validation import InputError
from rfa.layers.moe import CorrectionBias
from rfa.models.causal_lm import CausalLM
from rfa.models.safetensors import iter_checkpoint, read_tensor, write_tensors
from rfa.models.sharding import parameter_sharding


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One checkpoint tensor's places: the ``paths`` in the model's parameters (the keys of ``nnx.to_flat_state``,
    as strings) that it fills, the map ``to_model`` from the checkpoint's array to theirs (one array per path) and its
    inverse ``to_checkpoint``. Most tensors fill one parameter; a fused one (Qwen3.5's ``in_proj_qkv``) several; with
    ``index``, each fills one slice of a stacked parameter (an expert of a mixture, ``experts.{e}.*``).

    Example:
      >>> t = Tensor.linear("q_proj.weight", ("query", "kernel"), inputs=(8,), outputs=(2, 4))
      >>> [a.shape for a in t.to_model(np.zeros((8, 8)))]  # PyTorch's Linear.weight is [out, in]
      [(8, 2, 4)]
    """

    name: str
    paths: tuple[tuple[str, ...], ...]
    to_model: Callable[[np.ndarray], tuple[np.ndarray, ...]]
    to_checkpoint: Callable[..., np.ndarray]
    index: int | None = None

    @classmethod
    def same(cls, name: str, path: tuple[str, ...]) -> Tensor:
        """A tensor of the same layout in the checkpoint and the model (an embedding, a norm)."""
        return cls(name, (path,), lambda x: (x,), lambda x: x)

    @classmethod
    def linear(
        cls, name: str, path: tuple[str, ...], *, inputs: tuple, outputs: tuple, index: int | None = None
    ) -> Tensor:
        """A PyTorch ``Linear.weight`` ``[prod(outputs), prod(inputs)]`` as a kernel ``[*inputs, *outputs]``; with
        ``index``, the slice ``index`` of a stacked parameter (one expert of a mixture)."""
        fan_in, fan_out = int(np.prod(inputs)), int(np.prod(outputs))
        return cls(
            name,
            (path,),
            lambda w: (w.T.reshape(*inputs, *outputs),),
            lambda kernel: kernel.reshape(fan_in, fan_out).T,
            index,
        )

    @classmethod
    def grouped_linear(cls, name: str, paths: tuple, *, groups: int, sizes: tuple[int, ...], fan_in: int) -> Tensor:
        """A fused PyTorch ``Linear.weight`` whose rows are, per group, each part's ``sizes`` rows in turn (Qwen3-Next's
        ``in_proj_qkvz``, per key-head group): kernels ``[fan_in, groups · size]``, one per path."""
        bounds = np.cumsum(sizes)[:-1]

        def to_model(w):
            parts = np.split(w.reshape(groups, sum(sizes), fan_in), bounds, axis=1)
            return tuple(part.reshape(-1, fan_in).T for part in parts)

        def to_checkpoint(*kernels):
            return np.concatenate([k.T.reshape(groups, -1, fan_in) for k in kernels], axis=1).reshape(-1, fan_in)

        return cls(name, tuple(paths), to_model, to_checkpoint)

    @classmethod
    def depthwise(cls, name: str, path: tuple[str, ...]) -> Tensor:
        """A depthwise ``Conv1d.weight`` ``[channels, 1, taps]`` as rfa's ``[taps, channels]``."""
        return cls(name, (path,), lambda w: (w[:, 0, :].T,), lambda k: k.T[:, None, :])

    @classmethod
    def reshaped(cls, name: str, path: tuple[str, ...], shape: tuple) -> Tensor:
        """A flat tensor (a bias) as ``shape``."""
        return cls(name, (path,), lambda b: (b.reshape(shape),), lambda b: b.reshape(-1))

    @classmethod
    def split(cls, name: str, parts: dict[tuple[str, ...], Tensor], *, sizes: tuple[int, ...], axis: int = 0) -> Tensor:
        """A fused tensor, split along ``axis`` into ``sizes``, each part a one-path :class:`Tensor` of its own
        (``parts``, in order: path -> the part's map)."""
        bounds = np.cumsum(sizes)[:-1]
        maps = list(parts.values())
        return cls(
            name,
            tuple(parts),
            lambda x: tuple(m.to_model(p)[0] for m, p in zip(maps, np.split(x, bounds, axis=axis), strict=True)),
            lambda *arrays: np.concatenate([m.to_checkpoint(a) for m, a in zip(maps, arrays, strict=True)], axis=axis),
        )


@dataclasses.dataclass(frozen=True)
class Family:
    """A model family of Hugging Face's layout.

    Attributes:
      model_type: ``config.json``'s ``model_type``.
      config_class: the family's config (its ``lm``: the decoder it describes).
      config: ``config.json``'s dict (and keywords given to :func:`from_pretrained`) -> the family's config.
      hf_config: the family's config -> ``config.json``'s dict (:func:`save_pretrained`).
      tensors: the family's config -> every :class:`Tensor` of its checkpoint.
      model: the NNX model class, ``model(config, rngs=)`` (:class:`~rfa.models.causal_lm.CausalLM`).
    """

    model_type: str
    config_class: type
    config: Callable
    hf_config: Callable
    tensors: Callable
    model: type = CausalLM


_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Adds ``family`` to the registry (a ``model_type`` registered again is replaced)."""
    _FAMILIES[family.model_type] = family
    return family


def registered_families() -> tuple[str, ...]:
    """The ``model_type`` of every registered family.

    Example:
      >>> "qwen3" in registered_families()
      True
    """
    return tuple(sorted(_FAMILIES))


def read_config(directory: str) -> dict:
    """``config.json`` of ``directory``."""
    path = os.path.join(directory, "config.json")
    if not os.path.exists(path):
        raise InputError(f"{directory} has no config.json: not a Hugging Face model directory.")
    with open(path) as f:
        return json.load(f)


def refuse_unknown(hf: dict, reproduced: set[str], inert: set[str], family: str) -> None:
    """Refuses every field of ``hf`` that is neither mapped to the family's config (``reproduced``) nor without
    effect on its outputs (``inert``: token ids, dtypes, training-only settings)."""
    unknown = sorted(set(hf) - reproduced - inert)
    if unknown:
        raise InputError(
            f"{family}: config.json sets {unknown}, which rfa's {family} does not reproduce; it refuses the "
            "checkpoint rather than approximate it."
        )


LOADED = nnx.Any(nnx.Param, CorrectionBias)
"""The variables a checkpoint holds: the parameters, and a sigmoid router's correction bias (a buffer in PyTorch)."""
INERT = {
    "model_type",
    "architectures",
    "transformers_version",
    "torch_dtype",
    "dtype",
    "bos_token_id",
    "eos_token_id",
    "initializer_range",
    "use_cache",
    "attention_dropout",
}
"""``config.json`` fields without effect on a model's outputs: names, token ids, dtypes, training-only settings."""


def default_rope(hf: dict, family: str, *, default_theta: float, inert: tuple[str, ...] = ()) -> tuple[float, float]:
    """``(rope_theta, partial_rotary_factor)`` of a ``config.json`` (transformers 5's ``rope_parameters``, 4.x's
    ``rope_theta``, ``partial_rotary_factor`` and ``rope_scaling``), refusing any RoPE variant but the default and
    any field of ``rope_parameters`` besides these and ``inert``."""
    rope = dict(hf.get("rope_parameters") or {})
    kind, scaling = rope.pop("rope_type", "default"), hf.get("rope_scaling")
    if kind != "default" or (scaling and scaling.get("rope_type", scaling.get("type")) != "default"):
        raise InputError(f"{family}: RoPE variant {kind if kind != 'default' else scaling!r} is not reproduced.")
    theta = float(rope.pop("rope_theta", hf.get("rope_theta", default_theta)))
    fraction = float(rope.pop("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)))
    unknown = sorted(set(rope) - set(inert))
    if unknown:
        raise InputError(f"{family}: rope_parameters sets {unknown}, which rfa does not reproduce.")
    return theta, fraction


def from_pretrained(directory: str, *, dtype: str | None = None, mesh: jax.sharding.Mesh | None = None, **config):
    """The model of a Hugging Face directory (``config.json`` and ``model.safetensors`` or its shards), its weights
    loaded.

    Args:
      directory: the checkpoint's directory (``huggingface_hub.snapshot_download``'s, or ``save_pretrained``'s).
      dtype: the computation dtype (``"float32"``, ``"bfloat16"``, ...); parameters keep float32. None: float32.
      mesh: a ``(data, sequence, model)`` mesh (:func:`rfa.train.make_mesh`): each tensor is placed as it is read,
        split over ``model`` by :mod:`rfa.models.sharding`'s rules (heads, hidden units) or replicated; the rest of
        the state replicated. None: the default device.
      config: fields of the family's config to set over the checkpoint's: ``attention=Site(...)`` swaps the
        attention kind at every layer, the checkpoint's projections kept (:mod:`rfa.models.qwen3`).

    Example:
      >>> import tempfile
      >>> from rfa.models.causal_lm import CausalLM
      >>> from rfa.models.qwen3 import Qwen3Config
      >>> config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
      ...                      num_attention_heads=4, num_key_value_heads=2, head_dim=8)
      >>> directory = tempfile.mkdtemp()
      >>> save_pretrained(CausalLM(config, rngs=nnx.Rngs(0)), directory)
      >>> type(from_pretrained(directory).config).__name__
      'Qwen3Config'
    """
    hf = read_config(directory)
    family = _FAMILIES.get(hf.get("model_type"))
    if family is None:
        raise InputError(
            f"{directory}: model_type {hf.get('model_type')!r} is not a registered family "
            f"({list(registered_families())})."
        )
    model_config = family.config(hf, **({} if dtype is None else {"dtype": dtype}), **config)
    build = lambda: family.model(model_config, rngs=nnx.Rngs(0))  # noqa: E731
    model = nnx.eval_shape(build)  # the structure, no values
    # the state that is no checkpoint's (a kernelized site's random projection, its RNG counters), initialized under
    # jit: XLA leaves out the parameters' initial values, which nothing returns
    rest = jax.jit(lambda: nnx.state(build(), nnx.Not(LOADED)))()
    nnx.update(model, rest if mesh is None else jax.device_put(rest, NamedSharding(mesh, P())))
    places = {t.name: t for t in family.tensors(model_config)}
    params = nnx.state(model, LOADED)
    expected = {tuple(str(p) for p in path): variable for path, variable in nnx.to_flat_state(params)}

    def put(key, value):
        value = np.asarray(value, expected[key].dtype)
        return jnp.asarray(value) if mesh is None else jax.device_put(value, parameter_sharding(key, value.shape, mesh))

    unplaced = sorted(".".join(p) for p in set(expected) - {p for t in places.values() for p in t.paths})
    if unplaced:
        raise InputError(f"rfa's {family.model_type} has parameters no checkpoint tensor fills: {unplaced}.")
    stacks = {}  # parameters that several tensors fill, one slice each (a mixture's experts): filled in NumPy
    read = set()
    for name, path, entry in iter_checkpoint(directory):
        if name not in places:
            raise InputError(f"{directory}: tensor {name!r} has no place in rfa's {family.model_type}.")
        place, read = places[name], read | {name}
        variables = [expected[p] for p in place.paths]
        shapes = [v.shape if place.index is None else v.shape[1:] for v in variables]
        layout = tuple(place.to_checkpoint(*(np.zeros(shape, np.int8) for shape in shapes)).shape)
        if tuple(entry["shape"]) != layout:
            names = ", ".join(".".join(p) + ("" if place.index is None else f"[{place.index}]") for p in place.paths)
            raise InputError(
                f"{directory}: tensor {name!r} has shape {tuple(entry['shape'])}; rfa's {names} take {layout}."
            )
        for key, variable, value in zip(place.paths, variables, place.to_model(read_tensor(path, entry)), strict=True):
            if place.index is None:
                variable.set_value(put(key, value))
            else:
                stacks.setdefault(key, np.zeros(variable.shape, variable.dtype))[place.index] = value
    missing = sorted(set(places) - read)
    if missing:
        raise InputError(f"{directory}: the checkpoint lacks {missing}.")
    for key, stack in stacks.items():
        expected[key].set_value(put(key, stack))
    nnx.update(model, params)
    return model


def save_pretrained(model, directory: str) -> None:
    """Writes ``model`` as a Hugging Face directory (``config.json``, ``model.safetensors``) that
    :func:`from_pretrained` and transformers read: the inverse of its tensors' maps."""
    family = next((f for f in _FAMILIES.values() if type(getattr(model, "config", None)) is f.config_class), None)
    if family is None:
        raise InputError(
            f"{type(model).__name__} is not the model of a registered family ({list(registered_families())})."
        )
    os.makedirs(directory, exist_ok=True)
    params = {tuple(str(p) for p in path): v for path, v in nnx.to_flat_state(nnx.state(model, LOADED))}
    tensors = {
        t.name: t.to_checkpoint(
            *(np.asarray(jax.device_get(params[p][...] if t.index is None else params[p][t.index])) for p in t.paths)
        )
        for t in family.tensors(model.config)
    }
    write_tensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(family.hf_config(model.config), f, indent=2)
