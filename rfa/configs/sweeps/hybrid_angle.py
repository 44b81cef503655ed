"""Hybrid random features (HRF): MSE/SM² of trig, positive and hybrid against the angle, and the worst case.

|x| = |y| ∈ {1, 2}, m = 10 vectors, one angular feature (Choromanski et al., "Hybrid Random
Features", ICLR 2022). Monte Carlo where its predicted relative error is small.

Run:
  rfa sweep --config hybrid_angle --workdir workdir/hybrid_angle
  rfa sweep --config hybrid_angle:quick --workdir /tmp/hybrid
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "hybrid_angle"
    config.estimators = ("trig", "positive", "hybrid")  # hybrid and its two bases
    config.projections = ("iid",)
    config.num_features = (10,)  # m
    config.dim = 16  # d
    config.geometry.norms = (1.0, 2.0)  # |x| = |y|
    config.geometry.angles = tuple(float(a) for a in range(0, 181, 10))  # degrees
    config.repetitions = 20000  # Monte Carlo repetitions per cell
    config.max_relative_error = 0.1  # Monte Carlo only where it is meaningful
    quick = {"geometry.angles": (0.0, 60.0, 120.0, 180.0), "repetitions": 3000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
