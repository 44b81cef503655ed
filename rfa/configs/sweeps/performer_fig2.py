"""Performer Fig. 2: the ratio MSE_trig / MSE_positive over angle x length, closed form and Monte Carlo.

|x| = |y| = l at angle t; the ratio is independent of m and d. The full sweep is 73 angles x 20
lengths x {trig, positive} x 10^4 repetitions (the speed benchmark of docs/results/benchmarks.md).

Run:
  rfa sweep --config performer_fig2 --workdir workdir/performer_fig2
  rfa sweep --config performer_fig2:quick --workdir /tmp/fig2
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "performer_fig2"
    config.estimators = ("trig", "positive")  # the two estimators compared
    config.projections = ("iid",)  # the figure uses iid vectors
    config.num_features = (64,)  # m (the ratio does not depend on it)
    config.dim = 16  # d (the ratio does not depend on it)
    config.geometry.norms = tuple(round(0.1 * i, 1) for i in range(1, 21))  # l = 0.1 .. 2.0
    config.geometry.angles = tuple(float(a) for a in range(-180, 181, 5))  # every 5 degrees over [-180, 180]
    config.repetitions = 10000  # Monte Carlo repetitions per point
    quick = {
        "geometry.norms": (1.0, 2.0),  # the published slice (l = 1) and the l = 2 value
        "geometry.angles": (0.0, 30.0, 60.0, 90.0, 120.0, 150.0, 170.0),
        "repetitions": 2000,
    }
    return apply_variant(config, arg, {"full": {}, "quick": quick})
