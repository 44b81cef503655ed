"""Estimators inside real models: the per-site measures against float64 references and closed forms, and the
quick study end to end over rfa's decoder and a Flax-example encoder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import references

import rfa
from rfa.configs.studies import estimators_in_models
from rfa.experiments.studies.estimators_in_models import qk_scale
from rfa.experiments.studies.estimators_in_models.measure import (
    over_seeds,
    relative_error,
    run,
    site_measures,
    valid_pairs,
)
from rfa.experiments.studies.estimators_in_models.report import table
from rfa.workdir import ConfigError

B, L, H, D = 2, 12, 2, 8
ROOT = Path(__file__).resolve().parents[2]


def _inputs(scale=0.5):
    q, k, v = (scale * np.asarray(jax.random.normal(jax.random.key(i), (B, L, H, D))) for i in range(3))
    key_mask = np.ones((B, L), bool)
    key_mask[1, 8:] = False
    return q, k, v, key_mask


def _relative_error(estimate, exact, keep):  # over the kept rows, centered on their mean
    estimate, exact = np.asarray(estimate, np.float64)[keep], np.asarray(exact, np.float64)[keep]
    return np.linalg.norm(estimate - exact) / np.linalg.norm(exact - exact.mean(axis=0))


def test_relative_error_counts_only_kept_rows_and_centers_on_their_mean():
    rng = np.random.default_rng(0)
    exact, estimate, keep = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4)), rng.random((3, 5)) > 0.3
    assert float(relative_error(estimate, exact, keep)) == pytest.approx(_relative_error(estimate, exact, keep))


@pytest.mark.parametrize("causal", [False, True])
def test_site_measures_equal_the_float64_attention_and_the_closed_form_variance_of_positive_features(causal):
    q, k, v, key_mask = _inputs()
    key, m = jax.random.key(3), 64
    pairs = valid_pairs(key_mask, 24)
    rows, i, j = pairs
    assert key_mask[rows, i].all() and key_mask[rows, j].all()
    error, closed, measured = site_measures(
        q, k, v, key_mask, {}, pairs, key, estimator="positive", num_features=m, causal=causal, draws=4000
    )
    W = np.asarray(rfa.sample_projection(key, m, D))
    approx = references.kernelized_attention(q, k, v, "positive", W, keep_k=key_mask, keep_q=key_mask, causal=causal)
    exact = references.softmax_attention(q, k, v, keep_k=key_mask, keep_q=key_mask, causal=causal)
    assert float(error) == pytest.approx(_relative_error(approx, exact, key_mask), rel=1e-3)
    x, y = (np.swapaxes(a[rows, idx], 0, 1).astype(np.float64) * D**-0.25 for a, idx in ((q, i), (k, j)))
    expected = np.median((np.exp(np.sum((x + y) ** 2, -1)) - 1) / m)  # positive features: Var/SM² per draw of m
    assert float(closed) == pytest.approx(expected, rel=1e-4)
    assert float(measured) == pytest.approx(expected, rel=0.15)  # light tails at this scale: Monte Carlo agrees


def test_site_measures_take_a_fitted_estimators_parameters():
    q, k, v, key_mask = _inputs()
    params = rfa.attention.fit_feature_params("saderf", q, k, mask=key_mask[:, None, None, :])
    key, m = jax.random.key(5), 32
    error, _, _ = site_measures(
        q,
        k,
        v,
        key_mask,
        params,
        valid_pairs(key_mask, 8),
        key,
        estimator="saderf",
        num_features=m,
        causal=True,
        draws=8,
    )
    W = np.asarray(rfa.sample_projection(key, m, D))
    per_head = {name: np.asarray(value)[:, 0] for name, value in params.items()}  # [H, *event]
    approx = references.kernelized_attention(
        q, k, v, "saderf", W, keep_k=key_mask, keep_q=key_mask, causal=True, **per_head
    )
    exact = references.softmax_attention(q, k, v, keep_k=key_mask, keep_q=key_mask, causal=True)
    assert float(error) == pytest.approx(_relative_error(approx, exact, key_mask), rel=1e-3)


def test_rows_gather_every_seed_of_a_cell_however_the_records_are_ordered():
    def record(seed, estimator, error):
        return {
            "model": "encoder",
            "state": "init",
            "seed": seed,
            "estimator": estimator,
            "num_features": 64,
            "fit": "-",
            "output_error": error,
            "layer_errors": [error, 2 * error],
            "metric": 0.5,
            "exact_metric": 0.6,
            "metric_name": "accuracy",
            "closed_form_variance": 1.0,
            "measured_variance": 0.5,
        }

    records = [
        record(seed, e, error)
        for seed in (0, 1, 2)  # measured seed by seed, every estimator in each
        for e, error in (("positive", 0.1 * (seed + 1)), ("trig", 10.0 + seed))
    ]
    rows = over_seeds(records)
    assert [(r["estimator"], r["output_error"]["n"]) for r in rows] == [("positive", 3), ("trig", 3)]
    assert rows[0]["output_error"]["mean"] == pytest.approx(0.2) and rows[1]["output_error"]["mean"] == 11.0
    assert rows[0]["layer_errors"][1]["mean"] == pytest.approx(0.4)
    assert rows[0]["metric_change"] == {"mean": pytest.approx(-0.1), "std": pytest.approx(0.0), "n": 3}


@pytest.mark.slow
def test_the_quick_study_measures_every_model_state_and_fit(data_dir, tmp_path):
    study = estimators_in_models.get_config("quick")
    study.data_dir = data_dir
    rows = run(study, str(tmp_path))
    cells = [(r["model"], r["state"], r["fit"]) for r in rows]
    assert cells == [
        ("decoder", "init", "calibrated"),
        ("decoder", "trained", "calibrated"),  # causal: calibrated only
        ("flax", "init", "per_call"),
        ("flax", "init", "calibrated"),
        ("flax", "trained", "per_call"),
        ("flax", "trained", "calibrated"),
    ]
    for row in rows:
        assert len(row["layer_errors"]) == 1  # the quick models have one layer
        assert all(0 < e["mean"] < 10 for e in row["layer_errors"]) and 0 < row["output_error"]["mean"] < 10
        assert row["closed_form_variance"]["mean"] > 0 and row["measured_variance"]["mean"] > 0
        assert row["metric_name"] == ("perplexity" if row["model"] == "decoder" else "accuracy")
    per_call, calibrated = rows[2], rows[3]  # the Flax model at init: only the fit differs
    assert per_call["output_error"]["mean"] != calibrated["output_error"]["mean"]
    assert per_call["layer_errors"][0]["mean"] != calibrated["layer_errors"][0]["mean"]  # fitted to other batches
    assert (tmp_path / "decoder" / "seed_0" / "results.json").exists()  # the exact training run, read back later
    kept = sorted(os.listdir(tmp_path / "measures"))
    assert kept == [
        "decoder_init_seed0.json",
        "decoder_trained_seed0.json",
        "flax_init_seed0.json",
        "flax_trained_seed0.json",
    ]
    path = tmp_path / "measures" / "flax_init_seed0.json"
    saved = json.loads(path.read_text())
    saved["records"][0]["output_error"] = 123.0
    path.write_text(json.dumps(saved))
    assert run(study, str(tmp_path))[2]["output_error"]["mean"] == 123.0  # read back, not measured again
    lines = table(rows).splitlines()
    assert len(lines) == 2 + len(rows) + 1 + 4 and lines[-4].startswith("- decoder, init, m = 16: saderf (calibrated)")

    scale_rows = qk_scale.run(study, str(tmp_path))  # the same sites, q and k scaled by 0.5 and 1
    sweep = {(r["model"], r["state"], r["fit"], r["qk_scale"]): r for r in scale_rows}
    assert len(sweep) == len(scale_rows) == 2 * len(rows)
    for row in rows:  # s = 1 is the study's own measure
        own = sweep[row["model"], row["state"], row["fit"], 1.0]
        assert own["layer_error"]["mean"] == pytest.approx(row["layer_errors"][0]["mean"], rel=1e-5)
        assert own["closed_form_variance"]["mean"] == pytest.approx(row["closed_form_variance"]["mean"], rel=1e-5)
        half = sweep[row["model"], row["state"], row["fit"], 0.5]
        assert half["logit_std"]["mean"] == pytest.approx(own["logit_std"]["mean"] / 4, rel=1e-5)  # logits × s²
    assert sorted(name for name in os.listdir(tmp_path / "measures") if name.endswith("_qk_scale.json")) == [
        f"{model}_{state}_seed0_qk_scale.json" for model in ("decoder", "flax") for state in ("init", "trained")
    ]
    scale_lines = qk_scale.table(scale_rows).splitlines()
    assert scale_lines[0] == "| model | state | estimator | m | layer error, s = 0.5 | layer error, s = 1 |"
    assert scale_lines[-1].startswith("- flax, trained, lowest layer error at s = 0.5: saderf")

    output = tmp_path / "report" / "study.json"  # the command: everything read back from the measures above
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rfa.experiments.studies.estimators_in_models",
            "--config",
            "estimators_in_models:quick",
            "--workdir",
            str(tmp_path),
            f"--config.data_dir={data_dir}",
            f"--output={output}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(output.read_text())[2]["output_error"]["mean"] == 123.0
    assert (tmp_path / "report" / "study_qk_scale.md").read_text().splitlines()[:2] == scale_lines[:2]
    figures = ("study.png", "study_qk_scale.png")  # report.plot and qk_scale.plot, drawn by the command only
    assert all((tmp_path / "report" / name).stat().st_size > 10_000 for name in figures)


def test_an_unknown_model_or_fit_is_refused(tmp_path):
    study = estimators_in_models.get_config("quick")
    study.models = ("encoder", "gpt")
    with pytest.raises(ConfigError, match=r"config\.models: 'gpt' is not one of"):
        run(study, str(tmp_path))
    study = estimators_in_models.get_config("quick")
    study.fits = ("per_call", "sometimes")
    with pytest.raises(ConfigError, match=r"config\.fits: 'sometimes'"):
        run(study, str(tmp_path))
    study = estimators_in_models.get_config("quick")
    study.qk_scales = (1.0, 0.0)
    with pytest.raises(ConfigError, match=r"config\.qk_scales must be positive"):
        qk_scale.run(study, str(tmp_path))
