"""Weights of flash-linear-attention's (fla) delta-rule layers in rfa's: ``GatedDeltaNet``, ``DeltaNet`` and
``KimiDeltaAttention`` (``fla/layers/{gated_deltanet,delta_net,kda}.py``) into :class:`rfa.nnx.GatedDeltaNet`,
:class:`rfa.nnx.DeltaNet` and :class:`rfa.nnx.KimiDeltaAttention` built with the same options.

rfa's layers carry fla's parameter names; only the layouts differ, one rule per kind of weight:

- ``<name>.weight`` of an ``nn.Linear`` (``[out, in]``) is ``<name>.kernel`` (``[in, out]``), and
  ``<name>.<i>.weight`` in an ``nn.Sequential`` is ``<name>.layers.<i>.kernel``; biases keep their names;
- ``{q,k,v}_conv1d.weight`` (``[channels, 1, taps]``) is ``{q,k,v}_conv1d.weight`` (``[taps, channels]``);
- ``o_norm.weight`` is ``o_norm.scale``;
- ``A_log`` and ``dt_bias`` are themselves.

Nothing is downloaded: the state dict is the caller's (a PyTorch ``state_dict()`` moved to NumPy, or any mapping
of names to arrays).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from rfa._validation import InputError
from rfa.layers.fla_config import check_layer_options


def rfa_name_and_value(name: str, value) -> tuple[tuple[str, ...], np.ndarray]:
    """The path in rfa's layer of fla's parameter ``name`` and its value in rfa's layout.

    Example:
      >>> path, kernel = rfa_name_and_value("f_proj.0.weight", np.zeros((8, 32)))
      >>> path, kernel.shape
      (('f_proj', 'layers', '0', 'kernel'), (32, 8))
    """
    value = np.asarray(value)  # its precision kept: the layer's parameters take their own dtype
    parts = name.split(".")
    if parts[-1] == "weight" and parts[0].endswith("_conv1d"):
        if value.ndim != 3 or value.shape[1] != 1:
            raise InputError(f"{name}: a depthwise convolution's weight is [channels, 1, taps], got {value.shape}.")
        return tuple(parts), value[:, 0, :].T
    if parts == ["o_norm", "weight"]:
        return ("o_norm", "scale"), value
    if len(parts) == 3:  # a linear map inside an nn.Sequential
        parts = [parts[0], "layers", parts[1], parts[2]]
    if parts[-1] == "weight":
        if value.ndim != 2:
            raise InputError(f"{name}: a linear map's weight is [out, in], got {value.shape}.")
        return (*parts[:-1], "kernel"), value.T
    return tuple(parts), value


def load_fla_state_dict(
    layer: nnx.Module, state_dict: Mapping[str, object], *, prefix: str = "", config: object | None = None
) -> None:
    """Sets the parameters of ``layer`` (an :class:`rfa.nnx.DeltaNet`, :class:`rfa.nnx.GatedDeltaNet` or
    :class:`rfa.nnx.KimiDeltaAttention` built with the fla layer's options) from fla's ``state_dict``.

    Options do not travel in a state dict: a layer of other ``safe_gate``/``lower_bound``,
    ``output_gate_activation``, ``allow_neg_eigval``, ``qk_norm``, ... has the same names and shapes, and loads.
    Give fla's ``config`` where one is known, and an option that differs is refused by name; or build the layer
    from it (:func:`rfa.nnx.from_fla_config`).

    Args:
      layer: the rfa layer, changed in place.
      state_dict: fla's parameter names (after ``prefix``) to arrays (NumPy, or anything ``np.asarray`` reads:
        ``{k: v.float().numpy() for k, v in module.state_dict().items()}``).
      prefix: the layer's prefix in a whole model's state dict (``"model.layers.0.attn."``); keys without it are
        left out.
      config: fla's model config (a mapping such as ``config.json``'s, or fla's config object; its
        ``model_type`` names the layer), or ``{"layer": "KimiDeltaAttention", **the layer's arguments}``.

    Raises:
      InputError: a parameter of the layer that the state dict lacks, a name the layer has no parameter for, or
        a shape that differs (each named): the options differ from the fla layer's; with ``config``, an option of
        fla's that differs from the layer's, or one that rfa does not reproduce (named).

    Example:
      >>> layer = rfa.nnx.GatedDeltaNet(2, 16, use_short_conv=False, rngs=nnx.Rngs(0))
      >>> fla = {"q_proj.weight": np.ones((16, 16)), "k_proj.weight": np.ones((16, 16)),
      ...        "v_proj.weight": np.ones((16, 16)), "a_proj.weight": np.ones((2, 16)),
      ...        "b_proj.weight": np.ones((2, 16)), "A_log": np.zeros(2), "dt_bias": np.zeros(2),
      ...        "g_proj.weight": np.ones((16, 16)), "o_norm.weight": np.ones(8), "o_proj.weight": np.ones((16, 16))}
      >>> load_fla_state_dict(layer, fla)
      >>> float(layer.A_log[...].sum())
      0.0
    """
    if config is not None:
        check_layer_options(layer, config)
    converted = dict(
        rfa_name_and_value(name[len(prefix) :], value) for name, value in state_dict.items() if name.startswith(prefix)
    )
    params = nnx.state(layer, nnx.Param)
    expected = {tuple(str(p) for p in path): variable for path, variable in nnx.to_flat_state(params)}
    missing, unexpected = sorted(set(expected) - set(converted)), sorted(set(converted) - set(expected))
    if missing or unexpected:
        raise InputError(
            f"fla's state dict does not match the layer's parameters: the layer's {['.'.join(p) for p in missing]} "
            f"are missing, and {['.'.join(p) for p in unexpected]} have no place in the layer (build the rfa layer "
            "with the fla layer's options: head_dim, num_v_heads, expand_v, use_gate, use_short_conv, conv_bias, ...)."
        )
    differ = [
        f"{'.'.join(path)}: {converted[path].shape} in rfa's layout, the layer's {variable.shape}"
        for path, variable in expected.items()
        if converted[path].shape != variable.shape
    ]
    if differ:
        raise InputError(f"fla's parameters of other shapes than the layer's (other options?): {'; '.join(differ)}.")
    for path, variable in expected.items():
        variable.set_value(jnp.asarray(converted[path], variable.dtype))
    nnx.update(layer, params)
