"""Performer Lemma 2: closed-form MSE vs Monte Carlo for trig, positive and hyperbolic features.

Pairs |x| = |y| = l at angle t, including small-kernel pairs (large angles), several m.

Run:
  rfa sweep --config performer_lemma2 --workdir workdir/performer_lemma2
  rfa sweep --config performer_lemma2:quick --workdir /tmp/lemma2
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "performer_lemma2"
    config.estimators = ("trig", "positive", "hyperbolic")  # Lemma 2's three estimators
    config.projections = ("iid",)  # Lemma 2 is about iid vectors
    config.num_features = (4, 16, 64, 256)  # m
    config.dim = 16  # d
    config.geometry.norms = (0.5, 1.0, 1.25)  # l
    config.geometry.angles = (0.0, 60.0, 120.0, 150.0, 180.0)  # SM(x, y) from e^{l²} down to e^{-l²}
    config.repetitions = 20000  # independent projections per cell
    config.max_relative_error = 0.25  # cells whose Monte Carlo cannot be trusted are listed, not run
    quick = {"num_features": (4, 64), "geometry.norms": (0.5, 1.25), "repetitions": 2000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
