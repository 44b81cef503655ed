"""Fixtures from flash-linear-attention's own layers (fla 0.6): weights, inputs, outputs and a decode continuation.

Run by hand, in an environment of its own (the suite needs neither PyTorch nor fla; it reads the files written):

    python -m venv /tmp/fla && /tmp/fla/bin/pip install torch==2.13.0 flash-linear-attention==0.6.0 numpy
    TRITON_INTERPRET=1 /tmp/fla/bin/python tools/fla_fixtures.py

PyTorch runs on the CPU and fla's Triton kernels in Triton's interpreter (``TRITON_INTERPRET=1``, no GPU). The
interpreter cannot time kernels, so each autotuned kernel takes its first configuration. The layers run in eval
mode, with sequences of at most 64 tokens: fla's ``fused_recurrent`` kernels, the path fla takes at inference
(its ``chunk`` kernels fail in Triton 3.9's interpreter). Each case writes ``tests/fixtures/fla/<case>.npz``:

- ``arguments``: fla's layer and its keyword arguments (JSON);
- ``weight/<name>``: the layer's state dict, every parameter redrawn at a scale that makes each part matter
  (fla's initialization leaves the gates near 1);
- ``x``, ``mask``, ``out``: a batch of 3 rows of 12 tokens, whole, right-padded and padded on both sides
  (``attention_mask``, 0 at padding), and fla's output (0 at padding);
- ``prompt``, ``prompt_out``, then ``next``, ``next_out``: 8 tokens with ``use_cache``, then 3 more one at a time
  from fla's cache;
- ``cache/recurrent_state`` (``[batch, num_v_heads, d_v, d_k]``, fla's ``state_v_first``) and
  ``cache/conv_q``, ``cache/conv_k``, ``cache/conv_v`` (``[batch, channels, conv_size]``): fla's cache after the
  prompt.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import torch
import triton.runtime.autotuner as autotuner

_prune = autotuner.Autotuner.prune_configs
autotuner.Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]  # the interpreter cannot time

from fla.layers import DeltaNet, GatedDeltaNet, KimiDeltaAttention  # noqa: E402
from fla.models.utils import Cache  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "fla"
D = 32  # hidden_size
CASES = {  # fla's layer and its arguments; every case is small: 2 query/key heads of 8 channels
    "deltanet": ("DeltaNet", dict(num_heads=2, use_gate=True, conv_bias=True, allow_neg_eigval=True)),
    "gated_deltanet": ("GatedDeltaNet", dict(num_heads=2, head_dim=8, num_v_heads=4, expand_v=2)),
    "gated_deltanet_sigmoid_gate": (
        "GatedDeltaNet",
        dict(num_heads=2, head_dim=8, expand_v=1, output_gate_activation="sigmoid", allow_neg_eigval=True),
    ),
    "kda": ("KimiDeltaAttention", dict(num_heads=2, head_dim=8, num_v_heads=4)),
    "kda_safe_gate": ("KimiDeltaAttention", dict(num_heads=2, head_dim=8, safe_gate=True, lower_bound=-5.0)),
}
LAYERS = {"DeltaNet": DeltaNet, "GatedDeltaNet": GatedDeltaNet, "KimiDeltaAttention": KimiDeltaAttention}


def redraw(layer: torch.nn.Module, generator: torch.Generator) -> None:
    """Every parameter drawn anew: matrices at 1/√fan-in, ``A_log`` in [0, 2], ``dt_bias`` around −1 (decays
    from about 0.3 to 0.99 per token), norms' weights in [0.5, 1.5], biases at 0.1."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name == "A_log":
                p.copy_(torch.rand(p.shape, generator=generator) * 2)
            elif name == "dt_bias":
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5 - 1)
            elif name.startswith("o_norm"):
                p.copy_(torch.rand(p.shape, generator=generator) + 0.5)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=generator) * p.shape[-1] ** -0.5)


def case(name: str, fla_layer: str, arguments: dict, seed: int) -> dict[str, np.ndarray]:
    """One fixture's arrays (see the module's docstring)."""
    generator = torch.Generator().manual_seed(seed)
    layer = LAYERS[fla_layer](hidden_size=D, layer_idx=0, **arguments).eval()
    redraw(layer, generator)
    x = torch.randn(3, 12, D, generator=generator)
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 8:] = 0
    mask[2, :2] = mask[2, 10:] = 0
    prompt, following = torch.randn(2, 8, D, generator=generator), torch.randn(2, 3, D, generator=generator)
    with torch.no_grad():
        out = layer(x, attention_mask=mask)[0] * mask[..., None]
        cache = Cache()
        prompt_out = layer(prompt, past_key_values=cache, use_cache=True)[0]
        state = cache[0]
        after = {"cache/recurrent_state": state["recurrent_state"].clone()}
        if state["conv_state"] is not None:
            after |= {f"cache/conv_{n}": c.clone() for n, c in zip("qkv", state["conv_state"], strict=True)}
        next_out = torch.cat(
            [layer(following[:, t : t + 1], past_key_values=cache, use_cache=True)[0] for t in range(3)], 1
        )
    arrays = {"x": x, "mask": mask, "out": out, "prompt": prompt, "prompt_out": prompt_out, "next": following}
    arrays |= {"next_out": next_out, **after}
    arrays |= {f"weight/{k}": v for k, v in layer.state_dict().items()}
    fixture = {k: v.detach().float().numpy() if v.is_floating_point() else v.numpy() for k, v in arrays.items()}
    fixture["arguments"] = np.asarray(json.dumps({"layer": fla_layer, **arguments}))
    print(f"{name}: {fla_layer}({arguments}), state {tuple(after['cache/recurrent_state'].shape)}")
    return fixture


def main() -> None:
    import fla

    if fla.__version__ != "0.6.0":
        raise SystemExit(f"fla 0.6.0 is the reference; this environment has {fla.__version__}.")
    OUT.mkdir(parents=True, exist_ok=True)
    for seed, (name, (fla_layer, arguments)) in enumerate(CASES.items()):
        np.savez_compressed(OUT / f"{name}.npz", **case(name, fla_layer, arguments, seed))


if __name__ == "__main__":
    main()
