"""Estimators inside real models: how far each random-feature estimator is from softmax in a model as it is
(``rfa.experiments.studies.estimators_in_models.measure``).

Every model of ``config.models`` is taken at initialization and after training with exact attention; each
estimator of ``config.estimators`` at each m of ``config.num_features`` is swapped in afterwards (the same
weights), fitted per call or calibrated on held-out batches, once per seed.

Run:
  rfa study estimators_in_models --config estimators_in_models --workdir DIR
The same command measures the layer errors with every site's queries and keys scaled (``config.qk_scales``,
``rfa.experiments.studies.estimators_in_models.qk_scale``). Variants: ``:quick`` one data-fitted estimator (both fits)
at one m in rfa's
decoder and the Flax encoder, one seed, the quick training runs (a minute; the tests run it).
"""

import ml_collections

from rfa.configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    # model -> the task whose config builds and trains it; "flax" is a Flax-example encoder of
    # nnx.MultiHeadAttention layers (rfa.make_attention_fn per site), trained by the study's own loop.
    config.models = ("encoder", "decoder", "vit", "flax")
    config.tasks = ml_collections.ConfigDict(
        {
            "encoder": "listops",
            "decoder": "python_source",
            "vit": "digits",
            "flax": "listops",
        }
    )
    config.states = ("init", "trained")  # at initialization; after training with exact attention
    config.estimators = ("trig", "positive", "hyperbolic", "oprf", "saderf", "aderf")
    config.num_features = (64, 256, 1024)  # m
    config.fits = ("per_call", "calibrated")  # data-fitted maps: fitted to each call (bidirectional sites only)
    # or calibrated on held-out batches (rfa.layers.calibrating); maps without a fit measure once
    config.seeds = (0, 1, 2)  # the model's initialization or training run, and the random features
    config.scale = "short"  # the training runs' "exact,<scale>" ("": the task config's own)
    config.flax_steps = 300  # training steps of the Flax model (AdamW, the listops config's rate and batch)
    config.calibration_batches = 2  # validation batches the calibrated maps are fitted to
    config.eval_batches = 8  # test batches of the task metric (the errors and variances use the first)
    config.variance_pairs = 256  # query-key pairs per layer whose variance is compared with the closed form
    config.variance_draws = 64  # independent draws of the m random vectors per pair (the measured variance)
    config.qk_scales = (0.5, 1.0, 1.5)  # factors s on every site's q and k (logits times s²), measured at the
    # largest m by rfa.experiments.studies.estimators_in_models.qk_scale (1.0: the model's own)
    config.data_dir = "data"
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {
                "models": ("decoder", "flax"),
                "estimators": ("saderf",),
                "num_features": (16,),
                "seeds": (0,),
                "scale": "quick",
                "flax_steps": 12,
                "calibration_batches": 1,
                "eval_batches": 1,
                "variance_pairs": 32,
                "variance_draws": 16,
                "qk_scales": (0.5, 1.0),
            },
        },
    )
