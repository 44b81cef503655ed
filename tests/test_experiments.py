"""The entry points run end to end on small settings (as subprocesses, like a user runs them)."""

import csv
import json
import subprocess
import sys

import numpy as np


def run(*args):
    subprocess.run([sys.executable, "-m", *args], check=True, capture_output=True, text=True)


def test_demo_writes_report_where_theory_matches_monte_carlo(tmp_path):
    run("experiments.demo", f"--workdir={tmp_path}", "--draws=2000")
    assert (tmp_path / "report.md").read_text().startswith("# rfa demo")
    with open(tmp_path / "estimator_mse.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        theory, monte_carlo, se = (float(row[k]) for k in ("mse_theory", "mse_monte_carlo", "standard_error"))
        assert abs(theory - monte_carlo) < 5 * se + 0.2 * theory, row  # heavy tails at the large-kernel pair
    with open(tmp_path / "attention_error.csv") as f:
        errors = {
            (r["input_scale"], r["estimator"], r["projection"], r["m"]): float(r["mse"]) for r in csv.DictReader(f)
        }
    assert errors[("1.0", "trig", "iid", "16")] > 100 * errors[("1.0", "positive", "iid", "16")]


def test_benchmark_writes_json(tmp_path):
    output = tmp_path / "bench.json"
    run("experiments.benchmark_attention", "--lengths=64,128", "--repeats=1", "--min_repeats=1", f"--output={output}",
        "--huge_pages=false")  # fmt: skip
    report = json.loads(output.read_text())
    assert [r["length"] for r in report["results"]] == [64, 128]
    for result in report["results"]:
        for case in ("exact", "bidir", "causal"):
            assert result["cases"][case]["median_ms"] > 0
            assert result["cases"][case]["memory"]["peak_bytes"] > 0
        assert np.isfinite(result["ratios"]["causal_over_bidir"])
