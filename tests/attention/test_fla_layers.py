"""rfa's delta-rule layers against flash-linear-attention's (fla) layers, with fla's weights.

The reference is a NumPy forward of fla's ``GatedDeltaNet``, ``DeltaNet`` and ``KimiDeltaAttention`` written from
``fla/layers/{gated_deltanet,delta_net,kda}.py`` and the recurrences of ``fla/ops`` (``fused_recurrent``): the
projections, the short convolutions with their activations, the q/k activation and norm, β, the decay, grouped value
heads, the token-by-token delta rule, the gated output norm and the output projection. A padded row is what fla
makes of ``attention_mask``: its kept tokens as one sequence (varlen), zeros at the padding. The weights are a
synthetic fla state dict (fla's names and shapes), loaded through :func:`rfa.layers.fla_weights.load_fla_state_dict`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tiered

import rfa
from rfa.layers.fla_weights import load_fla_state_dict

D = 32  # hidden_size


def _silu(x):
    return x / (1 + np.exp(-x))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


ACTIVATIONS = {"silu": _silu, "relu": lambda x: np.maximum(x, 0), "elu": lambda x: np.where(x > 0, x + 1, np.exp(x))}


def fla_state_dict(
    kind, num_heads, head_dim, num_v_heads, expand_v, *, use_gate, use_short_conv, conv_bias, use_beta, seed=0
):
    """Random weights with the names and shapes of fla 0.6's layer ``kind`` (PyTorch layouts; KDA's ``A_log``,
    ``b_proj``, ``dt_bias`` and ``f_proj`` keyed to the value heads)."""
    rng = np.random.default_rng(seed)
    key_dim, head_v_dim = num_heads * head_dim, int(head_dim * expand_v)
    value_dim = num_v_heads * head_v_dim

    def w(*shape, scale=None):
        return rng.normal(0, scale or shape[-1] ** -0.5, shape)

    sd = {"q_proj.weight": w(key_dim, D), "k_proj.weight": w(key_dim, D), "v_proj.weight": w(value_dim, D)}
    if use_short_conv:
        for name, channels in (("q", key_dim), ("k", key_dim), ("v", value_dim)):
            sd[f"{name}_conv1d.weight"] = w(channels, 1, 4, scale=0.5)
            if conv_bias:
                sd[f"{name}_conv1d.bias"] = w(channels, scale=0.1)
    if use_beta:
        sd["b_proj.weight"] = w(num_v_heads, D)
    if kind == "gated_deltanet":
        sd |= {
            "a_proj.weight": w(num_v_heads, D),
            "A_log": rng.uniform(0, 2, num_v_heads),
            "dt_bias": rng.normal(-2, 0.5, num_v_heads),
        }
    if kind == "kda":
        sd |= {
            "f_proj.0.weight": w(head_v_dim, D),
            "f_proj.1.weight": w(num_v_heads * head_dim, head_v_dim),
            "A_log": rng.uniform(0, 2, num_v_heads),
            "dt_bias": rng.normal(-2, 0.5, num_v_heads * head_dim),
            "g_proj.0.weight": w(head_v_dim, D),
            "g_proj.1.weight": w(value_dim, head_v_dim),
            "g_proj.1.bias": w(value_dim, scale=0.1),
        }
    elif use_gate:
        sd["g_proj.weight"] = w(value_dim, D)
    sd["o_norm.weight"] = rng.uniform(0.5, 1.5, head_v_dim)
    sd["o_proj.weight"] = w(D, value_dim)
    return sd


def fla_forward(
    sd,
    x,
    kind,
    num_heads,
    head_dim,
    num_v_heads,
    expand_v,
    *,
    use_gate,
    use_short_conv,
    use_beta,
    allow_neg_eigval,
    qk_activation,
    qk_norm,
    output_gate_activation=None,
    lower_bound=None,
    norm_eps=1e-5,
):
    """fla 0.6's layer on one sequence ``x [T, D]`` (float64): ``[T, D]``."""
    T, head_v_dim = x.shape[0], int(head_dim * expand_v)

    def linear(name, y):
        out = y @ sd[f"{name}.weight"].T
        return out + sd[f"{name}.bias"] if f"{name}.bias" in sd else out

    def conv(name, y, activation):  # ShortConvolution: depthwise Conv1d, left-padded by its taps − 1
        weight = sd[f"{name}.weight"][:, 0, :]  # [C, K]
        taps = weight.shape[1]
        padded = np.concatenate([np.zeros((taps - 1, y.shape[1])), y])
        out = np.stack([(padded[t : t + taps] * weight.T).sum(0) for t in range(T)])
        out = out + sd.get(f"{name}.bias", 0.0)
        return activation(out) if activation else out

    q, k, v = linear("q_proj", x), linear("k_proj", x), linear("v_proj", x)
    if use_short_conv:  # fla's convolutions apply SiLU to q and k only when the activation is SiLU
        qk_conv = _silu if qk_activation == "silu" else None
        q, k, v = conv("q_conv1d", q, qk_conv), conv("k_conv1d", k, qk_conv), conv("v_conv1d", v, _silu)
    else:
        q, k = (_silu(y) if qk_activation == "silu" else y for y in (q, k))
        v = _silu(v)
    q, k = q.reshape(T, num_heads, head_dim), k.reshape(T, num_heads, head_dim)
    v = v.reshape(T, num_v_heads, head_v_dim)
    if qk_activation in ("relu", "elu"):
        q, k = ACTIVATIONS[qk_activation](q), ACTIVATIONS[qk_activation](k)
    if qk_norm == "sum":
        q, k = q / q.sum(-1, keepdims=True), k / k.sum(-1, keepdims=True)
    else:  # l2norm in the kernel (fla's eps 1e-6)
        q, k = (y / np.sqrt((y * y).sum(-1, keepdims=True) + 1e-6) for y in (q, k))
    beta = _sigmoid(linear("b_proj", x)) if use_beta else np.ones((T, num_heads))
    if allow_neg_eigval:
        beta = beta * 2
    group = num_v_heads // num_heads
    if kind == "gated_deltanet":
        g = -np.exp(sd["A_log"]) * _softplus(linear("a_proj", x) + sd["dt_bias"])  # [T, hv]
        g = np.broadcast_to(g[..., None], (T, num_v_heads, head_dim))
    elif kind == "kda":  # fla/ops/kda/gate.py: naive_kda_gate, or naive_kda_lowerbound_gate with lower_bound
        f = linear("f_proj.1", linear("f_proj.0", x)).reshape(T, num_v_heads, head_dim)
        f = f + sd["dt_bias"].reshape(num_v_heads, head_dim)
        a = np.exp(sd["A_log"])[:, None]
        g = -a * _softplus(f) if lower_bound is None else lower_bound * _sigmoid(a * f)
    else:
        g = np.zeros((T, num_v_heads, head_dim))
    q, k = np.repeat(q, group, axis=1), np.repeat(k, group, axis=1)  # "... h d -> ... (h g) d"
    beta = np.repeat(beta, num_v_heads // beta.shape[1], axis=1)
    o = np.zeros((T, num_v_heads, head_v_dim))
    for h in range(num_v_heads):  # fused_recurrent: decay, erase, write, read
        S = np.zeros((head_dim, head_v_dim))
        for t in range(T):
            S = np.exp(g[t, h])[:, None] * S
            S = S + beta[t, h] * np.outer(k[t, h], v[t, h] - S.T @ k[t, h])
            o[t, h] = S.T @ q[t, h] * head_dim**-0.5
    o = o / np.sqrt((o * o).mean(-1, keepdims=True) + norm_eps) * sd["o_norm.weight"]
    if kind == "kda":
        o = o * _sigmoid(linear("g_proj.1", linear("g_proj.0", x))).reshape(o.shape)
    elif use_gate:  # FusedRMSNormGated: "swish" and "silu" are y·sigmoid(y)
        gate = _sigmoid if output_gate_activation == "sigmoid" else _silu
        o = o * gate(linear("g_proj", x)).reshape(o.shape)
    return linear("o_proj", o.reshape(T, -1))


CASES = {  # fla's options of each layer (DeltaNet's qk_activation and qk_norm are its own)
    "gated_deltanet": (
        "gated_deltanet",
        dict(head_dim=8, num_v_heads=4, expand_v=2.0, conv_bias=True, allow_neg_eigval=True),
    ),
    "gated_deltanet_plain": ("gated_deltanet", dict(use_gate=False, use_short_conv=False)),
    "deltanet_relu_gate": ("deltanet", dict(qk_activation="relu", use_gate=True, use_beta=False)),
    "deltanet_elu_sum": ("deltanet", dict(qk_activation="elu", qk_norm="sum", use_short_conv=False)),
    "deltanet_identity": ("deltanet", dict(qk_activation="identity", head_dim=12)),
    "kda": ("kda", dict(head_dim=8, num_v_heads=4, allow_neg_eigval=True)),
    "kda_lower_bound": ("kda", dict(head_dim=8, num_v_heads=4, safe_gate=True, lower_bound=-3.0)),
    "gated_deltanet_sigmoid_gate": ("gated_deltanet", dict(output_gate_activation="sigmoid")),
}
LAYERS = {"deltanet": rfa.nnx.DeltaNet, "gated_deltanet": rfa.nnx.GatedDeltaNet, "kda": rfa.nnx.KimiDeltaAttention}


@nnx.jit
def _apply(layer, x, mask):
    return layer(x, mask=mask)


@nnx.jit
def _input_gradient(layer, x, weights):
    return jax.grad(lambda x: jnp.sum(layer(x)[0] * weights))(x)


def _layer_and_reference(case, **precision):
    """The rfa layer of ``case`` with fla's weights, and fla's forward of one sequence with its options."""
    kind, options = CASES[case]
    num_heads = 2
    layer = LAYERS[kind](num_heads, D, chunk_size=4, rngs=nnx.Rngs(0), **options, **precision)
    o = rfa.models.DeltaRuleOptions(**options)
    head_dim, num_v_heads = o.key_dim(D, num_heads), o.value_heads(num_heads)
    gated = o.use_gate if o.use_gate is not None else kind != "deltanet"
    shapes = (kind, num_heads, head_dim, num_v_heads, o.expand_v)
    sd = fla_state_dict(
        *shapes, use_gate=gated, use_short_conv=o.use_short_conv, conv_bias=o.conv_bias, use_beta=o.use_beta
    )
    load_fla_state_dict(layer, sd)
    fields = ("use_short_conv", "use_beta", "allow_neg_eigval", "qk_activation", "qk_norm")
    fields += ("output_gate_activation", "lower_bound")
    settings = {name: getattr(o, name) for name in fields}
    return layer, lambda x: fla_forward(sd, x, *shapes, use_gate=gated, **settings)


@pytest.mark.parametrize("case", tiered(list(CASES), {"gated_deltanet", "kda_lower_bound"}))
def test_the_layer_with_fla_weights_is_fla_s_layer(case):
    """Each of fla's options against the NumPy forward of fla's layer, in a batch of a whole row, a right-padded
    row and a row padded on both sides (fla runs each row's kept tokens as one sequence)."""
    layer, reference = _layer_and_reference(case)
    x = np.random.default_rng(1).normal(size=(3, 11, D))
    keep = np.ones((3, 11), bool)
    keep[1, 7:] = False  # right padding
    keep[2, :2] = keep[2, 9:] = False  # both sides
    out = _apply(layer, jnp.asarray(x, jnp.float32), nnx.make_attention_mask(keep, keep))
    for row in range(3):
        expected = np.zeros((11, D))
        expected[keep[row]] = reference(x[row, keep[row]])
        np.testing.assert_allclose(out[row], expected, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize(
    "case", tiered(["gated_deltanet", "deltanet_relu_gate", "kda_lower_bound"], {"kda_lower_bound"})
)
def test_in_float64_the_layer_is_fla_s_layer_to_float64_precision_in_values_and_gradients(case):
    """With ``jax.enable_x64`` and ``dtype=param_dtype=float64`` the layer, its state and its gates are float64:
    the output equals fla's NumPy forward to 1e-10 (float32 gives 1e-6), and the gradient along two random
    directions of the input equals the forward's central differences (step 1e-5, error ~1e-9)."""
    with jax.enable_x64(True):
        layer, reference = _layer_and_reference(case, dtype=jnp.float64, param_dtype=jnp.float64)
        rng = np.random.default_rng(3)
        x, weights = rng.normal(size=(1, 9, D)), rng.normal(size=(9, D))
        out = _apply(layer, jnp.asarray(x), None)
        assert out.dtype == layer.o_norm.scale[...].dtype == jnp.float64
        np.testing.assert_allclose(out[0], reference(x[0]), rtol=1e-10, atol=1e-10)
        grad = _input_gradient(layer, jnp.asarray(x), jnp.asarray(weights))
        for _ in range(2):
            direction, step = rng.normal(size=x.shape), 1e-5
            ahead, behind = (np.sum(reference(x[0] + sign * step * direction[0]) * weights) for sign in (1, -1))
            np.testing.assert_allclose(np.sum(grad * direction), (ahead - behind) / (2 * step), rtol=1e-7)


def test_a_state_dict_of_other_options_is_refused_by_name():
    """A state dict of fla's layer with other options than the rfa layer's names what does not fit."""
    layer = rfa.nnx.GatedDeltaNet(2, D, rngs=nnx.Rngs(0))
    sd = fla_state_dict(
        "gated_deltanet", 2, 16, 2, 1.0, use_gate=True, use_short_conv=True, conv_bias=True, use_beta=True
    )
    with pytest.raises(rfa.InputError, match=r"q_conv1d\.bias.*have no place"):
        load_fla_state_dict(layer, sd)
    sd = fla_state_dict(
        "gated_deltanet", 2, 16, 2, 2.0, use_gate=True, use_short_conv=True, conv_bias=False, use_beta=True
    )
    with pytest.raises(rfa.InputError, match=r"v_proj\.kernel: \(32, 64\) in rfa's layout, the layer's \(32, 32\)"):
        load_fla_state_dict(layer, sd)
    prefixed = {
        f"model.layers.0.attn.{name}": value
        for name, value in fla_state_dict(
            "gated_deltanet", 2, 16, 2, 1.0, use_gate=True, use_short_conv=True, conv_bias=False, use_beta=True
        ).items()
    }
    load_fla_state_dict(layer, prefixed | {"model.norm.weight": np.ones(D)}, prefix="model.layers.0.attn.")
    np.testing.assert_array_equal(
        layer.o_proj.kernel[...], prefixed["model.layers.0.attn.o_proj.weight"].T.astype(np.float32)
    )
