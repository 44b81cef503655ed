"""Chefs' Random Tables: log-variance of trig, positive and OPRF features at d = 64.

Closed form over norms and angles; Monte Carlo where its predicted relative error is small (with
heavy tails a sample variance says nothing). m = 1 gives the per-vector variance of the paper.

Run:
  rfa sweep --config oprf_variance --workdir workdir/oprf_variance
  rfa sweep --config oprf_variance:quick --workdir /tmp/oprf
"""

import math

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "oprf_variance"
    config.estimators = ("trig", "positive", "oprf")  # CRT's comparison
    config.projections = ("iid",)  # per-vector variance
    config.num_features = (1,)  # m = 1: the variance of one random vector's estimate
    config.dim = 64  # d
    config.geometry.norms = (0.5, 1.0, 1.5, 2.0, 2 * math.sqrt(2), 3.5)  # l, with CRT's example 2√2
    config.geometry.angles = (0.0, 30.0, 60.0, 90.0, 120.0, 150.0)  # t
    config.repetitions = 100000  # Monte Carlo repetitions per cell
    config.max_relative_error = 0.1  # Monte Carlo only where it is meaningful
    quick = {"geometry.norms": (1.0, 2 * math.sqrt(2)), "geometry.angles": (60.0, 120.0), "repetitions": 20000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
