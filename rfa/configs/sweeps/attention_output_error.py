"""Performer Fig. 4: MSE of the kernelized attention output vs m, iid, orthogonal and simplex, three input
scales, for every softmax-kernel estimator (the 2021 ones, hybrid and the DERF family fitted per call).

q, k ~ N(0, s²), v ~ N(0, 1), one head; the "mean of V" output is the baseline an estimator must beat.

Run:
  rfa sweep --config attention_output_error --workdir workdir/attention_output_error
  rfa sweep --config attention_output_error:quick --workdir /tmp/attention
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("attention_error")
    config.name = "attention_output_error"
    config.estimators = ("trig", "positive", "hyperbolic", "oprf", "hybrid", "saderf", "sderf", "aderf")
    config.projections = ("iid", "orthogonal", "simplex")  # every kind at every m
    config.num_features = (16, 32, 64, 128, 256)  # m
    config.dim = 16  # d (head dimension)
    config.length = 4096  # L
    config.input_scales = (0.5, 1.0, 1.5)  # s
    config.num_seeds = 15  # the paper's 15 seeds
    quick = {
        "num_features": (16, 64),
        "projections": ("orthogonal",),  # iid against orthogonal is orthogonal_vs_iid's comparison
        "length": 512,
        "input_scales": (0.5, 1.0),
        "num_seeds": 3,
    }
    return apply_variant(config, arg, {"full": {}, "quick": quick})
