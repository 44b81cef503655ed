"""Dense-exponential random features: the mean log-variance of positive, OPRF, SADERF, SDERF and ADERF.

Each estimator is fitted to queries and keys, then its one-vector variance is averaged over all
query-key pairs: on synthetic anisotropic sets (d = 16, different covariances) and on the queries
and keys of a trained model's encoder attention (Likhosherstov et al., "Dense-Exponential Random
Features", arXiv 2302.00787).

Run:
  rfa sweep --config derf_variance --workdir workdir/derf_variance
  rfa sweep --config derf_variance:quick --workdir /tmp/derf
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("estimator_fit")
    config.name = "derf_variance"
    config.estimators = ("positive", "oprf", "saderf", "sderf", "aderf")
    config.num_features = (1,)  # per-vector variances
    config.dim = 16  # d of the synthetic set (the model's is its head dimension)
    config.datasets = ("anisotropic", "trained_model")
    config.num_vectors = 512  # queries and keys per set and head
    config.input_scale = 0.7  # largest standard deviation of the synthetic entries
    config.anisotropy = 8.0
    config.pairs_checked = 8  # pairs per head checked by Monte Carlo
    config.repetitions = 20000
    config.model.config = "sort:exact"
    config.model.num_train_steps = 300
    quick = {
        "num_vectors": 128,
        "repetitions": 4000,
        "pairs_checked": 4,
        # sort's quick-scale model (2 heads of d = 16, one layer each side), trained as long: the full-size model's
        # training was 40% of the quick main job's CPU time
        "model.config": "sort:exact,quick",
        "model.num_train_steps": 40,
    }
    return apply_variant(config, arg, {"full": {}, "quick": quick})
