"""Mutants of rfa/experiments/studies/: distillation, estimators in models, forecasting, length
generalization, recall.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant

ESTIMATORS_IN_MODELS = "rfa/experiments/studies/estimators_in_models/measure.py"
ESTIMATORS_TESTS = "tests/experiments/test_estimators_in_models.py"

MUTANTS = [
    # Claims everywhere (issue 57).
    Mutant(
        "forecast-selected-on-test",
        "rfa/experiments/studies/forecasting/measure.py",
        'scale: float(np.mean([r["validation"]["mse"]["mean"] for r in rows])) for scale',
        'scale: float(np.mean([r["test"]["mse"]["mean"] for r in rows])) for scale',
        (
            "tests/experiments/test_forecast.py::test_a_configuration_is_selected_on_validation_and_only_its_runs_are_reported",
        ),
        "the forecasting configuration is chosen on the test years",
    ),
    Mutant(
        "recall-rate-chosen-on-test",
        "rfa/experiments/studies/recall/measure.py",
        '        sweep[f"{rate:g}"] = row["validation"]["accuracy"]["mean"]',
        '        sweep[f"{rate:g}"] = row["test"]["accuracy"]["mean"]',
        (
            "tests/experiments/test_recall.py::test_each_setting_trains_its_seeds_at_the_rate_of_the_best_validation_accuracy",
        ),
        "the recall study picks each kind's learning rate on the test split",
    ),
    Mutant(
        "length-floor-counts-padding",
        "rfa/experiments/studies/length_generalization/measure.py",
        "    weights = targets != PAD_ID\n",
        "    weights = np.ones_like(targets, dtype=bool)\n",
        ("tests/experiments/test_length_generalization.py",),
        "the floors count padding as predicted tokens",
    ),
    Mutant(
        "state-bytes-of-every-layer",
        "rfa/experiments/studies/recall/measure.py",
        "jax.tree.leaves(caches)) / len(caches))",
        "jax.tree.leaves(caches)))",
        ("tests/experiments/test_recall.py",),
        "the recall study's state size counts all layers, not one",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "length-study-evaluates-the-training-task",
        "rfa/experiments/studies/length_generalization/measure.py",
        "    config.task, config.eval_batches = study.longer_task, study.longer_batches",
        "    config.eval_batches = study.longer_batches",
        ("tests/experiments/test_length_generalization.py",),
        "the longer-length accuracy is the training length's",
    ),
    Mutant(
        "model-error-not-centered",
        ESTIMATORS_IN_MODELS,
        "    return jnp.sqrt(error / jnp.sum(jnp.where(rows, (exact - mean) ** 2, 0.0)))",
        "    return jnp.sqrt(error / jnp.sum(jnp.where(rows, exact**2, 0.0)))",
        (ESTIMATORS_TESTS,),
        "the relative error divides by the uncentered norm (a shared offset counts as signal)",
    ),
    Mutant(
        "model-variance-not-relative",
        ESTIMATORS_IN_MODELS,
        "num_features, **params) - 2 * log_sm)",
        "num_features, **params) - log_sm)",
        (ESTIMATORS_TESTS,),
        "the closed-form variance is divided by κ, not κ²",
    ),
    Mutant(
        "model-variance-unscaled",
        ESTIMATORS_IN_MODELS,
        "    scale = q.shape[-1] ** -0.25\n",
        "    scale = 1.0\n",
        (ESTIMATORS_TESTS,),
        "the variance is of exp(qᵀk), not of the softmax logit's exp(qᵀk/√d)",
    ),
    Mutant(
        "calibrated-layer-fit-per-call",
        ESTIMATORS_IN_MODELS,
        '    q, k, _, key_mask, _ = site if fit == "per_call" else calibration_site',
        "    q, k, _, key_mask, _ = site",
        (ESTIMATORS_TESTS,),
        "the calibrated layer error fits to the measured batch itself",
    ),
    Mutant(
        "qk-scale-queries-only",
        "rfa/experiments/studies/estimators_in_models/qk_scale.py",
        "    return (q * s, k * s, *rest)",
        "    return (q * s, k, *rest)",
        (ESTIMATORS_TESTS,),
        "the q/k-scale sweep scales the queries only (the logits by s, not s²)",
    ),
    Mutant(
        "qk-scale-sweep-unscaled",
        "rfa/experiments/studies/estimators_in_models/qk_scale.py",
        "        sites = [scaled(site, s) for site in prepared.sites]\n",
        "        sites = list(prepared.sites)\n",
        (ESTIMATORS_TESTS,),
        "the sweep measures the model's own q and k at every s",
    ),
    Mutant(
        "distill-first-seed-only",
        "rfa/experiments/studies/distillation/report.py",
        "Spread.of(result[field] for result in results)",
        "Spread.of(results[0][field] for result in results)",
        ("tests/experiments/test_distill.py",),
        "the distillation table reports the first seed as every seed's",
    ),
    Mutant(
        "recall-sweep-at-the-smallest-m",
        "rfa/experiments/studies/recall/measure.py",
        "swept_at = counts[len(counts) // 2] if study.sweep_per_kind else m",
        "swept_at = counts[0] if study.sweep_per_kind else m",
        ("tests/experiments/test_recall.py",),
        "the per-kind learning-rate sweep runs at the smallest m instead of the middle one",
    ),
]
