"""The shipped experiment kinds and reproductions: importing this module registers them all."""

from rfa.experiments.sweeps import (
    attention_error,
    attention_output_error,
    derf_variance,
    estimator_fit,
    hybrid_angle,
    kernel_mse,
    oprf_variance,
    orthogonal_vs_iid,
    performer_fig2,
    performer_lemma2,
    simplex_geometry,
    which_estimator_wins,
)

KINDS = (kernel_mse, attention_error, estimator_fit)
REPRODUCTIONS = (
    performer_lemma2,
    performer_fig2,
    orthogonal_vs_iid,
    oprf_variance,
    attention_output_error,
    hybrid_angle,
    simplex_geometry,
    which_estimator_wins,
    derf_variance,
)
