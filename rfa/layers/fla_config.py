"""rfa's delta-rule layers built from flash-linear-attention's (fla 0.6) arguments: a layer's keyword arguments
(``fla/layers/{delta_net,gated_deltanet,kda}.py``) or a model's config (``fla/models/*/configuration_*.py``).

A state dict carries weights, not options: ``safe_gate`` and ``lower_bound``, ``output_gate_activation``,
``allow_neg_eigval`` or ``qk_norm`` change no name and no shape, so weights load into a layer of other options and
give other outputs. The options travel here instead, and an option that rfa does not reproduce is refused by name,
never dropped. ``mode`` (fla's choice of kernel: ``chunk`` or ``fused_recurrent``, the same function) and
``layer_idx`` (its slot in fla's cache) change no output and are accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flax import nnx

from rfa._validation import InputError
from rfa.layers.state_layers import DeltaNet, GatedDeltaNet, KimiDeltaAttention


@dataclasses.dataclass(frozen=True)
class FlaLayer:
    """One of fla's layers: rfa's class, its model type in fla's configs, fla's arguments that rfa takes under
    the same name (the rest: ``hidden_size``, ``num_heads`` and DeltaNet's ``expand_k``, converted), and whether
    its cache keeps the state ``[d_v, d_k]`` (``state_v_first``, Gated DeltaNet's and KDA's) or ``[d_k, d_v]``."""

    layer: type
    model_type: str
    same: tuple[str, ...]
    state_v_first: bool = True


COMMON = ("use_short_conv", "conv_size", "conv_bias", "allow_neg_eigval", "norm_eps")
FLA_LAYERS = {
    "DeltaNet": FlaLayer(
        DeltaNet, "delta_net", COMMON + ("use_beta", "use_gate", "qk_activation", "qk_norm"), state_v_first=False
    ),
    "GatedDeltaNet": FlaLayer(
        GatedDeltaNet,
        "gated_deltanet",
        COMMON + ("head_dim", "num_v_heads", "expand_v", "use_gate", "output_gate_activation"),
    ),
    "KimiDeltaAttention": FlaLayer(
        KimiDeltaAttention, "kda", COMMON + ("head_dim", "num_v_heads", "expand_v", "safe_gate", "lower_bound")
    ),
}
NO_OUTPUT = ("mode", "layer_idx")  # fla's kernel choice and cache slot
MODEL_KEYS = {"attn_mode": "mode"}  # a model config's name for a layer's argument


def rfa_arguments(fla_layer: str, arguments: Mapping[str, object]) -> dict:
    """rfa's keyword arguments for fla's layer ``fla_layer`` (``"DeltaNet"``, ``"GatedDeltaNet"`` or
    ``"KimiDeltaAttention"``) built with ``arguments``: ``num_heads``, ``in_features`` (fla's ``hidden_size``, or
    DeltaNet's ``d_model``) and the options. fla's defaults fill what ``arguments`` leaves out (Gated DeltaNet's
    ``head_dim`` 256 and ``expand_v`` 2, KDA's ``head_dim`` 128, ...), as fla's layer would.

    Raises:
      InputError: an unknown layer, or an argument that rfa does not reproduce (named).

    Example:
      >>> rfa_arguments("KimiDeltaAttention", {"hidden_size": 64, "num_heads": 2, "head_dim": 16,
      ...                                      "safe_gate": True, "lower_bound": -5.0, "mode": "chunk"})
      {'num_heads': 2, 'in_features': 64, 'head_dim': 16, 'expand_v': 1.0, 'safe_gate': True, 'lower_bound': -5.0}
    """
    if fla_layer not in FLA_LAYERS:
        raise InputError(f"fla's layer must be one of {list(FLA_LAYERS)}, got {fla_layer!r}.")
    entry, given = FLA_LAYERS[fla_layer], dict(arguments)
    if given.get("d_model") is not None:  # DeltaNet's older name of hidden_size, which it takes first
        given["hidden_size"] = given.pop("d_model")
    given.pop("d_model", None)
    unknown = sorted(set(given) - set(entry.same) - set(NO_OUTPUT) - {"hidden_size", "num_heads", "expand_k"})
    if fla_layer != "DeltaNet" and "expand_k" in given:
        unknown = sorted([*unknown, "expand_k"])
    if unknown:
        raise InputError(
            f"fla's {fla_layer} with {unknown}: rfa's {entry.layer.__name__} does not reproduce these arguments "
            f"(it takes {sorted(entry.same)}, with hidden_size and num_heads); leave them out or at fla's defaults."
        )
    values = _fla_defaults(fla_layer) | {name: value for name, value in given.items() if name not in NO_OUTPUT}
    out = {"num_heads": values["num_heads"], "in_features": values["hidden_size"]}
    if fla_layer == "DeltaNet":  # widths as fractions of hidden_size: d_k = hidden·expand_k / heads, d_v likewise
        key_dim = values["hidden_size"] * values["expand_k"]
        out |= {"head_dim": int(key_dim) // values["num_heads"], "expand_v": values["expand_v"] / values["expand_k"]}
    else:  # fla's widths, not rfa's defaults (in_features // num_heads, expand_v 1)
        out |= {"head_dim": values["head_dim"], "expand_v": values["expand_v"]}
    return out | {name: given[name] for name in entry.same if name in given and name not in out}


def _fla_defaults(fla_layer: str) -> dict:
    """fla 0.6's defaults of the arguments that set a layer's widths."""
    return {
        "DeltaNet": {"hidden_size": 1024, "num_heads": 4, "expand_k": 1.0, "expand_v": 1.0},
        "GatedDeltaNet": {"hidden_size": 2048, "num_heads": 6, "head_dim": 256, "expand_v": 2.0},
        "KimiDeltaAttention": {"hidden_size": 2048, "num_heads": 16, "head_dim": 128, "expand_v": 1.0},
    }[fla_layer]


def from_fla_layer(fla_layer: str, arguments: Mapping[str, object], *, rngs: nnx.Rngs, **rfa_options) -> nnx.Module:
    """rfa's layer for fla's layer ``fla_layer`` built with ``arguments`` (:func:`rfa_arguments`);
    ``rfa_options`` are rfa's own (``chunk_size``, ``dtype``, ``param_dtype``, ``decode``, ...).

    Example:
      >>> layer = from_fla_layer("GatedDeltaNet", {"hidden_size": 32, "num_heads": 2, "head_dim": 8,
      ...                                          "output_gate_activation": "sigmoid"}, rngs=nnx.Rngs(0))
      >>> type(layer).__name__, layer.options.output_gate_activation, layer.head_v_dim
      ('GatedDeltaNet', 'sigmoid', 16)
    """
    kwargs = rfa_arguments(fla_layer, arguments)
    heads, width = kwargs.pop("num_heads"), kwargs.pop("in_features")
    return FLA_LAYERS[fla_layer].layer(heads, width, rngs=rngs, **kwargs, **rfa_options)


def layer_arguments(config: Mapping[str, object] | object) -> tuple[str, dict]:
    """fla's layer and its arguments in a model's config (a mapping, as ``config.json`` reads, or fla's config
    object): the ``model_type`` names the layer, and the config's keys that are the layer's arguments are taken,
    as fla's modeling file passes them (``attn_mode`` is ``mode``). The model's own keys (vocabulary, depth, MLP,
    softmax layers) are not the layer's and stay out.

    Example:
      >>> layer_arguments({"model_type": "kda", "hidden_size": 64, "num_heads": 2, "head_dim": 16,
      ...                  "vocab_size": 100, "attn_mode": "chunk"})
      ('KimiDeltaAttention', {'hidden_size': 64, 'num_heads': 2, 'head_dim': 16, 'mode': 'chunk'})
    """
    values = dict(config) if isinstance(config, Mapping) else dict(vars(config))
    model_type = values.get("model_type", getattr(type(config), "model_type", None))
    by_type = {entry.model_type: name for name, entry in FLA_LAYERS.items()}
    if model_type not in by_type:
        raise InputError(f"fla's model_type must be one of {sorted(by_type)}, got {model_type!r}.")
    name = by_type[model_type]
    layer_keys = set(FLA_LAYERS[name].same) | {"hidden_size", "num_heads", "expand_k", "use_output_norm"}
    arguments = {
        MODEL_KEYS.get(key, key): value for key, value in values.items() if key in layer_keys | set(MODEL_KEYS)
    }
    if arguments.get("use_output_norm", True) is True:  # DeltaNet's output norm, which rfa always applies
        arguments.pop("use_output_norm", None)
    return name, arguments


def from_fla_config(config: Mapping[str, object] | object, *, rngs: nnx.Rngs, **rfa_options) -> nnx.Module:
    """rfa's layer for the delta-rule layers of fla's model ``config`` (:func:`layer_arguments`, then
    :func:`from_fla_layer`).

    Example:
      >>> layer = from_fla_config({"model_type": "gated_deltanet", "hidden_size": 32, "num_heads": 2,
      ...                          "head_dim": 8, "expand_v": 2}, rngs=nnx.Rngs(0))
      >>> type(layer).__name__, layer.num_v_heads, layer.head_v_dim
      ('GatedDeltaNet', 2, 16)
    """
    name, arguments = layer_arguments(config)
    return from_fla_layer(name, arguments, rngs=rngs, **rfa_options)


def check_layer_options(layer: nnx.Module, config: Mapping[str, object] | object) -> None:
    """Refuses fla's ``config`` (a model config, or ``{"layer": fla's layer name, **its arguments}``) for
    ``layer`` where an option differs from the layer's, each named: what a state dict cannot tell."""
    if isinstance(config, Mapping) and "layer" in config:
        name, arguments = config["layer"], {key: value for key, value in config.items() if key != "layer"}
    else:
        name, arguments = layer_arguments(config)
    if name not in FLA_LAYERS or not isinstance(layer, FLA_LAYERS[name].layer):
        raise InputError(f"fla's {name} cannot load into rfa's {type(layer).__name__}.")
    wanted = rfa_arguments(name, arguments)
    differ = [
        f"{option}={value!r} (the layer's {_effective(layer, option)!r})"
        for option, value in wanted.items()
        if _effective(layer, option) != _effective_value(option, value)
    ]
    if differ:
        raise InputError(
            f"fla's {name} was built with {', '.join(differ)}: the weights would load and give other outputs. "
            "Build the layer from fla's config (rfa.nnx.from_fla_config) or with these options."
        )


def _effective_value(option: str, value):
    """An option's value as it acts: fla's ``"swish"`` is ``"silu"``."""
    return "silu" if option == "output_gate_activation" and value == "swish" else value


def _effective(layer: nnx.Module, option: str):
    """The value by which ``layer`` acts for ``option`` (its widths, and the kind's defaults where the option is
    None)."""
    if option in ("num_heads", "in_features", "head_dim", "num_v_heads"):
        return getattr(layer, option)
    if option == "expand_v":
        return layer.head_v_dim / layer.head_dim
    if option == "use_gate":
        return layer.g_proj is not None
    if option == "output_gate_activation":
        return _effective_value(option, layer.options.output_gate_activation or "swish")
    return getattr(layer.options, option)
