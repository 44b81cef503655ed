"""Performer Theorem 2: MSE vs m for iid and orthogonal positive and OPRF features.

The exact orthogonal MSE (blocks of d orthogonal rows) and Theorem 2's bound (m <= d) are drawn
beside Monte Carlo.

Run:
  rfa sweep --config orthogonal_vs_iid --workdir workdir/orthogonal_vs_iid
  rfa sweep --config orthogonal_vs_iid:quick --workdir /tmp/orthogonal
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "orthogonal_vs_iid"
    config.estimators = ("positive", "oprf")  # the estimators with an exact orthogonal MSE
    config.projections = ("iid", "orthogonal")  # compared at equal m
    config.num_features = (2, 4, 8, 16, 32, 64, 128)  # m: up to d, then 2, 4, 8 blocks
    config.dim = 16  # d
    config.geometry.norms = (1.0,)  # l
    config.geometry.angles = (60.0, 120.0)  # a large-kernel and a small-kernel pair
    config.repetitions = 20000  # Monte Carlo repetitions per cell
    quick = {"num_features": (4, 64), "repetitions": 2000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
