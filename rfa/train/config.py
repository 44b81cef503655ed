"""The training config: its schema, per-task configs with attention variants, checks, and the model it builds.

``rfa/configs/tasks/<task>.py`` calls :func:`task_config` with the task's sizes; its config string
selects the attention kind and, optionally, the quick variant used by the tests:
``--config sort:positive`` or ``--config sort:positive,quick``. The same
attention goes to every site (encoder self-attention, masked decoder self-attention,
cross-attention), with three exceptions: a gate (``gated_rfa``) decays the decoder's self-attention
only, Linformer, which cannot be causal, leaves the decoder's self-attention exact (a language
model, all causal, cannot use it), and the delta rule (``deltanet``, ``gated_deltanet``), which can only be
causal, leaves the encoder's self-attention and cross-attention exact (a classifier cannot use it), as a sliding
window leaves cross-attention.
``config.attention.layers`` names a variant per layer, cycled over the layers: a hybrid stack. At decoder
sites (self- and cross-attention) an estimator's data-fitted parameters (``fitted``, e.g. OPRF's ``phi_sq``)
are fixed: they cannot be fitted to a prefix without leaking the future, nor token by token when decoding.
They default to the estimator's ``standard_params(head_dim)``, its fit to unit-variance queries and keys (for OPRF,
``phi_sq = 2 sqrt(head_dim)``, the expected ``|x + y|²`` after the 1/d^¼ scaling).
"""

from __future__ import annotations

import json

import ml_collections
from flax import nnx

from rfa.random_features import estimator, registered_estimators
from rfa.tasks import Task, get_task, task_kind
from rfa.train.attention import ATTENTION_VARIANTS, layer_site, site_attentions
from rfa.train.attention import layer_variants as attention_layers
from rfa.train.optim import SCHEDULES
from rfa.train.sharding import SEQUENCE_AXIS
from rfa.workdir import ConfigError, apply_variant, import_modules

# Settings that never change what a run computes (beyond float rounding), so a resumed run may change them.
EXECUTION_FIELDS = ("data_dir", "mesh", "checks")


def base_config() -> ml_collections.ConfigDict:
    """Every training field with its default (a small model that trains on a CPU)."""
    config = ml_collections.ConfigDict()
    config.task = "sort"  # a registered task (rfa.tasks.registered_tasks())
    config.modules = ()  # modules imported first (from the current directory too): your tasks, task kinds, estimators
    config.data_dir = "data"  # TFDS data_dir: the project's datasets are prepared here on first use
    config.seed = 0  # initialization, shuffling, dropout and projection redraws
    config.max_length = 40  # L: padded / packed sequence length
    config.batch_size = 64  # global batch (all devices, all processes)
    config.num_train_steps = 2000
    config.log_every = 50  # training metrics are averaged over this many steps
    config.eval_every = 500
    config.eval_batches = 16  # evaluation batches per evaluation (0: the whole split)
    config.checkpoint_every = 500  # a multiple of log_every, so a resumed run logs what the first would have
    config.keep_checkpoints = 2  # newest checkpoints kept
    config.keep_checkpoints_every = 0  # also keep every this many steps (0: no)
    config.checks = True  # rfa's checks of input values (rfa.checks.enabled); False skips them, changing no number

    config.model = ml_collections.ConfigDict()
    config.model.d_model = 64
    config.model.num_heads = 4
    config.model.mlp_dim = 128
    config.model.num_encoder_layers = 2  # encoder-decoder and classifier
    config.model.num_decoder_layers = 2  # encoder-decoder and language model
    config.model.dropout_rate = 0.1
    config.model.norm = "pre"  # "post" (paper) or "pre"
    config.model.positional = "sinusoidal"  # "sinusoidal", "learned", "rotary", "relative" (kernelized: no decoding)
    config.model.pooling = "mean"  # classifier pooling: "mean" or "cls"
    config.model.architecture = "vit"  # images: "vit" or "swin"
    config.model.patch_size = 2  # images: side of the square patches
    config.model.patch_embedding = "linear"  # ViT: "linear" or "conv" (the same family of maps)
    config.model.window_size = 4  # Swin: side of the attention windows
    config.model.swin_depths = (2, 2)  # Swin: blocks per stage (d_model is the first stage's width)
    config.model.swin_heads = (2, 4)  # Swin: heads per stage
    config.model.swin_windowed = (True, True)  # Swin, per stage: shifted windows (exact) or global config.attention
    config.model.horizon = 12  # forecasting: steps forecast after each lookback of max_length steps
    config.model.patch_length = 1  # forecasting: steps per token (PatchTST)

    config.recall = ml_collections.ConfigDict()  # associative recall (MQAR, rfa.data.mqar); its length: max_length
    config.recall.vocab_size = 256  # V: keys from the lower half of ids 1..V-1, values from the upper half
    config.recall.num_pairs = 8  # N: key-value pairs, then each key queried once
    config.recall.num_train = 20_000  # training examples
    config.recall.num_eval = 1_000  # validation and test examples each

    config.attention = ml_collections.ConfigDict()
    config.attention.variant = "exact"  # a name of ATTENTION_VARIANTS (what the config string chose)
    config.attention.kind = "softmax"  # a registered kind (rfa.layers.registered_attention_kinds()) or an estimator
    config.attention.num_features = 64  # the kind's size: m of random features (Hedgehog: d'), a window, Linformer's k
    config.attention.projection_kind = "orthogonal"  # how W's rows are drawn: "orthogonal", "iid", "simplex", ...
    config.attention.scaling = "chi"  # row norms: "chi" or "sqrt_d"
    config.attention.chunk_size = 32  # causal kernelized chunk length
    config.attention.redraw_every = 0  # draw new projections every this many steps (0: never)
    # the estimator's fixed parameters, ((name, value), ...), at every site; a fitted one given here is not fitted
    # (OPRF: (("phi_sq", 8.0),)); decoder sites fix the others at the estimator's standard_params(head_dim)
    config.attention.feature_params = ()
    config.attention.gated = False  # a learned decay gate at the decoder's self-attention (needs a decoder)
    config.attention.gate = "head"  # what the gate decays: "head" (the state) or "feature" (each row of it: GLA)
    config.attention.layers = ()  # variants per layer, cycled (a hybrid stack); (): every layer is kind
    config.attention.qk_map = ""  # the delta rule's q/k map: "" the papers' (SiLU, L2), or an estimator's features

    config.optimizer = ml_collections.ConfigDict()
    config.optimizer.learning_rate = 1e-3  # peak rate (inverse_sqrt: a multiplier, 1.0 = paper)
    config.optimizer.schedule = "cosine"  # "cosine", "inverse_sqrt" (paper) or "constant"
    config.optimizer.warmup_steps = 100
    config.optimizer.final_fraction = 0.1  # cosine ends at this fraction of the peak
    config.optimizer.b1 = 0.9
    config.optimizer.b2 = 0.98  # the paper's Adam beta_2
    config.optimizer.eps = 1e-9  # the paper's Adam epsilon
    config.optimizer.weight_decay = 0.01  # AdamW, decoupled
    config.optimizer.grad_clip_norm = 1.0  # global-norm clipping (0: none)
    config.optimizer.label_smoothing = 0.0  # the paper uses 0.1 for translation

    config.mesh = ml_collections.ConfigDict()
    config.mesh.data = -1  # data-parallel devices (-1: all left after model)
    config.mesh.model = 1  # devices splitting heads and MLP units
    config.mesh.sequence = 1  # devices splitting the sequence (kernelized attention runs sequence-parallel)
    return config


QUICK = {
    "max_length": 24,
    "batch_size": 8,
    "num_train_steps": 12,
    "log_every": 4,
    "eval_every": 12,
    "eval_batches": 2,
    "checkpoint_every": 4,
    "model.d_model": 32,
    "model.num_heads": 2,
    "model.mlp_dim": 64,
    "model.num_encoder_layers": 1,
    "model.num_decoder_layers": 1,
    "attention.num_features": 16,
    "attention.chunk_size": 8,
    "optimizer.warmup_steps": 4,
}


def task_config(task: str, arg: str | None, *, scales: dict[str, dict] | None = None, **fields):
    """The config of ``task`` with its ``fields`` (dotted names) and the variant ``arg = "<attention>[,<scale>]"``.

    Scales: ``quick`` (:data:`QUICK`, seconds-long test runs) and the config's own ``scales``, which
    add fields to ``quick`` or define others (e.g. ``cpu``: a scaled-down run of a long task).

    Example:
      >>> config = task_config("sort", "positive,quick", max_length=40)
    """
    scales = {
        "quick": QUICK | (scales or {}).get("quick", {}),
        **{k: v for k, v in (scales or {}).items() if k != "quick"},
    }
    attention, *rest = (arg or "exact").split(",")
    if attention not in ATTENTION_VARIANTS or len(rest) > 1 or (rest and rest[0] not in scales):
        raise ConfigError(
            f"config string must be '<attention>' or '<attention>,<scale>' with <attention> one of "
            f"{sorted(ATTENTION_VARIANTS)} and <scale> one of {sorted(scales)}, got {arg!r}."
        )
    config = apply_variant(base_config(), "full", {"full": {"task": task, **fields}})
    apply_variant(config, rest[0] if rest else "full", {"full": {}, **scales})
    variant = {f"attention.{name}": value for name, value in ATTENTION_VARIANTS[attention].items()}
    return apply_variant(config, "full", {"full": {"attention.variant": attention, **variant}})


def _positive_int(config, field: str, minimum: int = 1) -> None:
    value = config
    for part in field.split("."):
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"config.{field} must be an integer >= {minimum}, got {value!r}.")


def upgrade_saved(saved: dict) -> dict:
    """A training config as an earlier release saved it (a workdir's ``config.json``), in today's schema, so the
    run resumes and reads back: ``attention.projection`` is ``attention.projection_kind``, ``attention.phi_sq``
    (OPRF's fixed ``|x + y|²``, 0 for the default) is ``attention.feature_params``, and a field added since takes
    its default (what the earlier release computed with).

    Example:
      >>> old = {"attention": {"kind": "oprf", "projection": "iid", "phi_sq": 8.0}}
      >>> upgraded = upgrade_saved(old)["attention"]
      >>> upgraded["projection_kind"], upgraded["feature_params"], "phi_sq" in upgraded
      ('iid', [['phi_sq', 8.0]], False)
    """
    saved = json.loads(json.dumps(saved))
    attention = saved.setdefault("attention", {})
    if "projection" in attention:
        attention["projection_kind"] = attention.pop("projection")
    if "phi_sq" in attention:
        phi_sq = attention.pop("phi_sq")
        attention.setdefault("feature_params", [["phi_sq", phi_sq]] if phi_sq else [])

    def with_defaults(values: dict, defaults: dict) -> dict:
        for name, default in defaults.items():
            if name not in values:
                values[name] = default
            elif isinstance(default, dict) and isinstance(values[name], dict):
                with_defaults(values[name], default)
        return values

    return with_defaults(saved, json.loads(base_config().to_json()))


def _check_feature_params(layer: dict) -> None:
    """``config.attention.feature_params``: ``((name, number), ...)`` of parameters the layer's estimator has."""
    given = layer["feature_params"]
    if not all(isinstance(pair, tuple | list) and len(pair) == 2 for pair in given):
        raise ConfigError(f"config.attention.feature_params must be ((name, value), ...), got {given!r}.")
    if not given:
        return
    if layer["kind"] not in registered_estimators():
        raise ConfigError(f"config.attention.feature_params: {layer['kind']!r} is not an estimator, it takes none.")
    names = {param.name for param in estimator(layer["kind"]).params}
    for name, value in given:
        if name not in names or isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                f"config.attention.feature_params: {layer['kind']} has the parameters {sorted(names)}, each a "
                f"number; got {name}={value!r}."
            )


def check_config(config: ml_collections.ConfigDict) -> Task:
    """Raises ``ConfigError`` naming the first invalid field; returns the config's task."""
    import_modules(config.get("modules", ()))  # (a workdir of an earlier release has no such field)
    try:
        task = get_task(config.task)
    except ValueError as error:
        raise ConfigError(f"config.task: {error}") from error
    for field in (
        "max_length",
        "batch_size",
        "num_train_steps",
        "log_every",
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
    ):
        _positive_int(config, field)
    for field in ("eval_batches", "keep_checkpoints_every", "optimizer.warmup_steps"):
        _positive_int(config, field, minimum=0)
    if config.checkpoint_every % config.log_every:
        raise ConfigError(
            f"config.checkpoint_every ({config.checkpoint_every}) must be a multiple of config.log_every "
            f"({config.log_every}), so that a resumed run logs the same averages as an uninterrupted one."
        )
    _positive_int(config, "attention.redraw_every", minimum=0)
    if not isinstance(config.checks, bool):
        raise ConfigError(f"config.checks must be True or False, got {config.checks!r}.")
    if config.mesh.data != -1:
        _positive_int(config, "mesh.data")
    _positive_int(config, "mesh.model")
    _positive_int(config, "mesh.sequence")
    kind = task_kind(task.kind)
    kind.check_config(config)
    if config.mesh.sequence > 1 and not kind.splits_sequence:
        raise ConfigError(
            f"config.mesh.sequence = {config.mesh.sequence} splits the token sequences of the text models; "
            f"{config.task!r} trains a model of kind {task.kind!r}, which does not split its inputs: use "
            "mesh.sequence = 1."
        )
    if config.max_length % config.mesh.sequence:
        raise ConfigError(
            f"config.max_length = {config.max_length} must be divisible by config.mesh.sequence = "
            f"{config.mesh.sequence}: every device holds an equal block of each sequence."
        )
    o = config.optimizer
    for field, value, valid, expected in (
        ("learning_rate", o.learning_rate, o.learning_rate > 0, "> 0"),
        ("label_smoothing", o.label_smoothing, 0 <= o.label_smoothing < 1, "in [0, 1)"),
        ("grad_clip_norm", o.grad_clip_norm, o.grad_clip_norm >= 0, ">= 0 (0: no clipping)"),
        ("final_fraction", o.final_fraction, 0 <= o.final_fraction <= 1, "in [0, 1]"),
    ):
        if not valid:
            raise ConfigError(f"config.optimizer.{field} must be {expected}, got {value!r}.")
    if config.optimizer.schedule not in SCHEDULES:
        raise ConfigError(f"config.optimizer.schedule must be one of {SCHEDULES}, got {config.optimizer.schedule!r}.")
    if config.attention.gated and "decoder" not in kind.sites:
        raise ConfigError(
            f"config.attention.gated: the gate decays the decoder's causal state, and {config.task!r} trains a "
            f"{task.kind} model without a decoder."
        )
    for layer in layer_variants(config):
        _check_feature_params(layer)
        entry = layer_site(layer).entry
        for sites, able in ((("decoder",), "causal"), (("encoder",), "bidirectional")):
            if kind.sites == sites and not entry.runs(able):
                raise ConfigError(
                    f"config.attention.kind = {layer['kind']!r} cannot be {able}, and {config.task!r} trains "
                    f"{kind.description} ({able} self-attention only): choose another kind."
                )
    try:
        model_config(config, task)
    except ValueError as error:
        raise ConfigError(f"config.model / config.attention: {error}") from error
    return task


def layer_variants(config: ml_collections.ConfigDict) -> tuple[dict, ...]:
    """The attention fields of each layer (:func:`rfa.train.attention.layer_variants` over this schema's defaults)."""
    return attention_layers(config, base_config().attention.to_dict())


def model_config(config: ml_collections.ConfigDict, task: Task):
    """The model config of ``task``'s kind (``TaskKind.model_config``): widths from ``config.model``, each site's
    attention from ``config.attention``."""
    m = config.model
    head_dim = m.d_model // m.num_heads if m.num_heads > 0 else 0
    sequence_axis = SEQUENCE_AXIS if config.mesh.sequence > 1 else None
    defaults = base_config().attention.to_dict()
    return task_kind(task.kind).model_config(
        config, task, lambda site: site_attentions(config, defaults, head_dim, site), sequence_axis=sequence_axis
    )


def build_model(config: ml_collections.ConfigDict, task: Task) -> nnx.Module:
    """The task's model, initialized from ``config.seed``."""
    rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1, projection=config.seed + 2)
    return task_kind(task.kind).build_model(model_config(config, task), rngs)
