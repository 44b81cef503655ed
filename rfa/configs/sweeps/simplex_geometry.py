"""Simplex random features (SimRF): MSE of positive features with iid, orthogonal and simplex rows.

Against |x + y| (|x| = |y| at several angles) with m = d = 16, and (closed forms) against d (Reid,
Choromanski, Likhosherstov, Weller, "Simplex Random Features", ICML 2023).

Run:
  rfa sweep --config simplex_geometry --workdir workdir/simplex_geometry
  rfa sweep --config simplex_geometry:quick --workdir /tmp/simplex
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "simplex_geometry"
    config.estimators = ("positive",)
    config.projections = ("iid", "orthogonal", "simplex")  # compared at equal m
    config.num_features = (16,)  # m = d: one block
    config.dim = 16  # d
    config.geometry.norms = (0.5, 1.0, 1.5)  # |x| = |y|
    config.geometry.angles = (0.0, 60.0, 120.0, 150.0, 165.0, 175.0)  # |x + y| = 2|x| cos(angle/2)
    config.repetitions = 20000  # Monte Carlo repetitions per cell
    quick = {"geometry.norms": (1.0,), "geometry.angles": (0.0, 120.0, 165.0), "repetitions": 3000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
