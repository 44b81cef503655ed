"""The options of rfa's delta-rule layers (:mod:`rfa.layers.delta_rule.layer`), named as flash-linear-attention's
``DeltaNet``, ``GatedDeltaNet`` and ``KimiDeltaAttention`` layers name them, and what each kind adds to DeltaNet."""

from __future__ import annotations

import dataclasses
import math

import jax

from rfa._validation import InputError, InputTypeError, check_positive_int
from rfa.layers.feature_variables import MapOptions
from rfa.layers.kinds import SiteWidths, check_int
from rfa.random_features.feature_maps import estimator as lookup_estimator
from rfa.random_features.feature_maps import registered_estimators

QK_ACTIVATIONS = {
    "silu": jax.nn.silu,
    "relu": jax.nn.relu,
    "elu": lambda y: jax.nn.elu(y) + 1.0,  # elu+1, fla's elu_p1
    "identity": lambda y: y,
}
QK_NORMS = ("l2", "sum")
OUTPUT_GATE_ACTIVATIONS = {"swish": jax.nn.silu, "silu": jax.nn.silu, "sigmoid": jax.nn.sigmoid}  # fla's names


@dataclasses.dataclass(frozen=True)
class DeltaRuleSpec:
    """What a delta-rule kind adds to DeltaNet (each kind's layer class holds its own): ``decay`` (None, ``"head"``:
    one per token and value head, ``"channel"``: one per token, value head and key channel), ``output_gate``
    (``"full"``: full rank, on by ``use_gate``, its activation ``output_gate_activation``; ``"low_rank"``: low rank
    with a bias, always on, a sigmoid), and the name of fla's layer, which the refusals of options name."""

    decay: str | None
    output_gate: str
    gated_by_default: bool
    fla_name: str

    def check(self, options: DeltaRuleOptions) -> None:
        """Refuses an option of another kind: the lower-bounded gate is KDA's (a decay per key channel), and the
        output gate's activation is the full-rank gate's (KDA's low-rank gate is a sigmoid)."""
        if self.decay != "channel" and (options.lower_bound is not None or options.safe_gate):
            raise InputError(
                f"{self.fla_name}: lower_bound and safe_gate are options of KDA's gate (fla's KimiDeltaAttention), "
                f"got lower_bound={options.lower_bound!r}, safe_gate={options.safe_gate!r}."
            )
        if self.output_gate != "low_rank" and not options.output_gate_bias:
            raise InputError(
                f"{self.fla_name}: output_gate_bias is an option of KDA's low-rank output gate (its full-rank gate has "
                "no bias)."
            )
        if self.output_gate == "low_rank" and options.output_gate_activation not in (None, "sigmoid"):
            raise InputError(
                f"{self.fla_name}: the output gate is low rank and a sigmoid, as fla's; output_gate_activation="
                f"{options.output_gate_activation!r} is an option of the full-rank gate (GatedDeltaNet's)."
            )

    def gate_activation(self, options: DeltaRuleOptions):
        """The output gate's activation: ``options.output_gate_activation``, else the kind's (SiLU, fla's
        ``"swish"``, for the full-rank gate; a sigmoid for the low-rank one)."""
        default = "sigmoid" if self.output_gate == "low_rank" else "swish"
        return OUTPUT_GATE_ACTIVATIONS[options.output_gate_activation or default]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeltaRuleOptions(MapOptions):
    """The options of a delta-rule layer, named as flash-linear-attention's layers name them (and rfa's own: the
    chunk, and ``qk_map`` with the options of its map, :class:`~rfa.layers.feature_variables.MapOptions`).

    Attributes:
      num_heads: query/key heads (the layer's ``num_heads``; at a model's site, None: the model's).
      head_dim: d_k of a query/key head (None: ``in_features // num_heads``; fla's Gated DeltaNet defaults to 256).
      num_v_heads: value heads (None: ``num_heads``); more than ``num_heads``, a multiple of it, is grouped value
        attention (GVA): each group of value heads shares one query/key head.
      expand_v: a value head's width over ``head_dim`` (fla's Gated DeltaNet defaults to 2; rfa to 1, the width
        of ``nnx.MultiHeadAttention``).
      use_beta: a learned writing strength β per token and value head (False: β = 1).
      allow_neg_eigval: β ∈ [0, 2] instead of [0, 1] (the state-tracking variant).
      use_gate: the output gate (None: the kind's, on for Gated DeltaNet and KDA, off for DeltaNet).
      use_short_conv: the short convolution of q, k and v (without it, q, k and v go straight to their
        activations).
      conv_size: its taps.
      conv_bias: a bias in the convolution.
      qk_activation: of q and k: ``"silu"``, ``"relu"``, ``"elu"`` (elu+1) or ``"identity"``.
      qk_norm: of q and k per head: ``"l2"`` or ``"sum"`` (divided by their sum).
      output_gate_activation: of the full-rank output gate, fla's ``"swish"`` (SiLU, the default), ``"silu"``
        (the same) or ``"sigmoid"`` (None: the kind's; KDA's low-rank gate is always a sigmoid).
      output_gate_bias: a bias on the second map of KDA's low-rank output gate (fla's layer has one; Kimi Linear's
        Hugging Face checkpoints, ``g_b_proj``, do not).
      lower_bound: KDA's lower-bounded gate ``g = lower_bound · sigmoid(exp(A_log) · (f_proj x + dt_bias))``, each
        log-decay in ``(lower_bound, 0)``, in place of ``−exp(A_log) · softplus(f_proj x + dt_bias)`` (None; fla's
        ``fla/ops/kda/gate.py``). Negative.
      safe_gate: fla's promise that the gates lie in ``[lower_bound, 0)`` with ``lower_bound`` in [−5, 0), which
        fla's kernels use for speed; here it requires that range and starts ``A_log`` at 0, as fla's layer does.
      norm_eps: ε of the output RMSNorm.
      chunk_size: tokens per chunk of the chunked form.
      recurrent_below: a prompt of at most this many tokens entering a decode cache (a prefill) runs the recurrent
        form, token by token; 0: always chunked. The default is fla's threshold for its GPU kernels (64); on the
        2-core CPU of ``rfa benchmark prefill`` the recurrent form was the faster prefill at every length measured.
      qk_map: None (the q/k activation and norm above), or a registered estimator whose L2-normalized features
        replace them (the kernelized delta rule, :func:`rfa.attention.delta_rule.normalized_features`), with
        ``num_features`` its m; its W is drawn from the layer's ``rngs`` and redrawn by :func:`rfa.nnx.redraw`.

    Example:
      >>> options = DeltaRuleOptions(head_dim=16, num_v_heads=8, expand_v=2.0)
      >>> options.head_v_dim(32, 4), options.value_heads(4)
      (32, 8)
    """

    head_dim: int | None = None
    num_v_heads: int | None = None
    expand_v: float = 1.0
    use_beta: bool = True
    allow_neg_eigval: bool = False
    use_gate: bool | None = None
    use_short_conv: bool = True
    conv_size: int = 4
    conv_bias: bool = False
    qk_activation: str = "silu"
    qk_norm: str = "l2"
    output_gate_activation: str | None = None
    output_gate_bias: bool = True
    lower_bound: float | None = None
    safe_gate: bool = False
    norm_eps: float = 1e-5
    chunk_size: int = 64
    recurrent_below: int = 64
    qk_map: str | None = None
    num_features: int = 64

    def __post_init__(self):
        super().__post_init__()
        check_int(self, "chunk_size")
        check_int(self, "recurrent_below", minimum=0)
        self.check_qk_map(type(self).__name__)
        for name in ("head_dim", "num_v_heads"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), f"DeltaRuleOptions.{name}")
        check_positive_int(self.conv_size, "DeltaRuleOptions.conv_size")
        for name in ("use_beta", "allow_neg_eigval", "use_short_conv", "conv_bias", "safe_gate", "output_gate_bias"):
            if not isinstance(getattr(self, name), bool):
                raise InputTypeError(f"DeltaRuleOptions.{name} must be a bool, got {getattr(self, name)!r}.")
        if self.use_gate is not None and not isinstance(self.use_gate, bool):
            raise InputTypeError(f"DeltaRuleOptions.use_gate must be None or a bool, got {self.use_gate!r}.")
        if self.qk_activation not in QK_ACTIVATIONS or self.qk_norm not in QK_NORMS:
            raise InputError(
                f"DeltaRuleOptions: qk_activation must be one of {list(QK_ACTIVATIONS)} and qk_norm one of "
                f"{list(QK_NORMS)}, got {self.qk_activation!r} and {self.qk_norm!r}."
            )
        if self.output_gate_activation not in (None, *OUTPUT_GATE_ACTIVATIONS):
            raise InputError(
                f"DeltaRuleOptions: output_gate_activation must be None or one of {list(OUTPUT_GATE_ACTIVATIONS)}, "
                f"got {self.output_gate_activation!r}."
            )
        self.check_gate_bound()
        if not self.expand_v > 0 or not self.norm_eps > 0:
            raise InputError(
                f"DeltaRuleOptions: expand_v and norm_eps must be > 0, got {self.expand_v!r} and {self.norm_eps!r}."
            )

    def check_gate_bound(self) -> None:
        """``lower_bound`` is a negative number; ``safe_gate`` needs one in [−5, 0) (fla's ``chunk_kda``)."""
        bound = self.lower_bound
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int | float) or not bound < 0):
            raise InputError(f"DeltaRuleOptions.lower_bound must be None or a negative number, got {bound!r}.")
        if self.safe_gate and (bound is None or bound < -5):
            raise InputError(
                f"DeltaRuleOptions: safe_gate=True needs lower_bound in [-5, 0) (fla's; -5 is its advice), got "
                f"lower_bound={bound!r}."
            )

    def key_dim(self, in_features: int, num_heads: int) -> int:
        """d_k: ``head_dim``, else ``in_features // num_heads`` (which must then divide)."""
        if self.head_dim is not None:
            return self.head_dim
        if in_features % num_heads:
            raise InputError(
                f"in_features ({in_features}) must be divisible by num_heads ({num_heads}), or give head_dim."
            )
        return in_features // num_heads

    def head_v_dim(self, in_features: int, num_heads: int) -> int:
        """d_v = ``d_k · expand_v``, which must be a whole number."""
        d_v = self.key_dim(in_features, num_heads) * self.expand_v
        if not math.isclose(d_v, round(d_v)):
            raise InputError(f"head_dim · expand_v must be a whole number, got {d_v} (expand_v={self.expand_v}).")
        return round(d_v)

    def value_heads(self, num_heads: int) -> int:
        """``num_v_heads``, else ``num_heads``; a multiple of ``num_heads``."""
        heads = self.num_v_heads or num_heads
        if heads % num_heads:
            raise InputError(f"num_v_heads ({heads}) must be a multiple of num_heads ({num_heads}).")
        return heads

    def size(self) -> int | None:
        """m of ``qk_map`` where it sets the features' length, else None (the papers' map has none)."""
        if self.qk_map is None or not lookup_estimator(self.qk_map).uses_num_features:
            return None
        return self.num_features

    def check_qk_map(self, where: str) -> None:
        """Refuses a ``qk_map`` the delta rule cannot take, or one beside a q/k activation or norm it replaces."""
        if self.qk_map is None:
            return
        if self.qk_map not in registered_estimators():
            raise InputError(
                f"{where}: qk_map must be None or a registered estimator {list(registered_estimators())}, got "
                f"{self.qk_map!r}."
            )
        fm = lookup_estimator(self.qk_map)
        if set(fm.required) - set(fm.sampled) or fm.learned or fm.kernel == "gaussian":
            raise InputError(
                f"{where}: qk_map={self.qk_map!r} needs parameters fitted, learned or given, or estimates the "
                "Gaussian kernel; the delta rule takes a map of the softmax kernel with fixed parameters (positive, "
                "trig, hyperbolic, elu, relu, taylor, ...)."
            )
        if (self.qk_activation, self.qk_norm) != ("silu", "l2"):
            raise InputError(
                f"{where}: qk_map={self.qk_map!r} replaces qk_activation and qk_norm (its features are "
                "L2-normalized); leave them at 'silu' and 'l2'."
            )

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        """The delta rule is causal self-attention; its widths must fit the model's."""
        if not causal:
            raise InputError(
                f"{site}: the delta rule updates a state token by token (it is causal); {site} attends "
                "bidirectionally or to a memory. Use it at the decoder's self-attention."
            )
        if widths.positional == "relative":
            raise InputError(f"{site}: the delta rule has no relative bias; the short convolution gives position.")
        heads = self.num_heads or widths.num_heads
        self.head_v_dim(widths.d_model, heads)
        self.value_heads(heads)
