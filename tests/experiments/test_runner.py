"""End to end: every reproduction's quick variant, resuming, kill -9, and the main job's command line."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from configs import performer_fig2
from experiments import reproduce, runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(name):
    return __import__(f"configs.{name}", fromlist=["get_config"]).get_config("quick")


def _agreement(report):
    agree, compared = map(int, re.search(r"\*\*(\d+) of (\d+)\*\* compared cells agree", report).groups())
    return agree, compared


def _column(report, header):
    """The cells of column ``header`` in the first markdown table that has it."""
    for table in report.split("\n\n"):
        lines = table.splitlines()
        if lines and lines[0].startswith("|") and header in lines[0]:
            index = [c.strip() for c in lines[0].strip("|").split("|")].index(header)
            return [[c.strip() for c in line.strip("|").split("|")][index] for line in lines[2:]]
    raise AssertionError(f"no table with column {header!r}")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Runs each quick reproduction once; the tests below read its outputs."""
    root = tmp_path_factory.mktemp("reproductions")
    return {name: runner.run(_config(name), str(root / name), progress=False) for name in reproduce.REPRODUCTIONS}


def _report(outputs):
    with open(outputs.report) as f:
        return f.read()


def test_every_reproduction_writes_tables_figures_and_report(reports):
    for name, outputs in reports.items():
        workdir = os.path.dirname(outputs.report)
        assert outputs.figures, name
        assert all(os.path.getsize(f) > 10_000 for f in outputs.figures)
        with open(os.path.join(workdir, "results.json")) as f:
            assert len(json.load(f)) == len(outputs.records)
        with open(outputs.results) as f:
            assert len(f.read().splitlines()) == len(outputs.records) + 1
        report = _report(outputs)
        assert report.startswith(f"# {name}") and "## Run" in report
        for figure in outputs.figures:
            assert f"]({os.path.basename(figure)})" in report


def test_lemma2_closed_forms_agree_with_monte_carlo(reports):
    agree, compared = _agreement(_report(reports["performer_lemma2"]))
    assert agree == compared > 30


def test_fig2_reproduces_the_published_ratios(reports):
    report = _report(reports["performer_fig2"])
    assert _column(report, "within 5%") == ["yes"] * 5
    agree, compared = _agreement(report)
    assert agree == compared > 0


def test_orthogonal_features_beat_iid_and_satisfy_theorem_2(reports):
    report = _report(reports["orthogonal_vs_iid"])
    assert set(_column(report, "ort ≤ iid")) == {"yes"}
    assert set(_column(report, "ort ≤ bound")) == {"yes", "—"} and "yes" in _column(report, "ort ≤ bound")
    agree, compared = _agreement(report)
    assert agree == compared > 0


def test_oprf_variance_matches_chefs_random_tables(reports):
    report = _report(reports["oprf_variance"])
    assert _column(report, "within 0.1") == ["yes"] * 3
    records = reports["oprf_variance"].records
    assert any(r["repetitions"] == 0 for r in records) and any(r["repetitions"] > 0 for r in records)


def test_attention_error_reproduces_the_input_scale_claims(reports):
    report = _report(reports["attention_output_error"])
    assert _column(report, "reproduced") == ["yes", "yes"]
    for record in reports["attention_output_error"].records:  # catastrophic: worse than averaging V
        if record["estimator"] == "trig" and record["input_scale"] == 1.0:
            assert record["mse"] > record["mean_of_v_mse"]


def test_rerun_resumes_without_recomputing(tmp_path, monkeypatch):
    config = performer_fig2.get_config("quick")
    first = runner.run(config, str(tmp_path), progress=False)
    os.remove(os.path.join(tmp_path, "cells", "trig_iid_m64_norm1_angle150.json"))
    computed = []
    original = runner.measure.measure_kernel_mse

    def counting(config, group, done):
        for cell, record in original(config, group, done):
            computed.append(cell.name)
            yield cell, record

    monkeypatch.setattr(runner.measure, "measure_kernel_mse", counting)
    second = runner.run(config, str(tmp_path), progress=False)
    assert computed == ["trig_iid_m64_norm1_angle150"]
    for record in first.records + second.records:
        record.pop("seconds")
    assert second.records == first.records  # the group's chunk is recomputed whole: the same bits  # fmt: skip


def test_kill_9_loses_no_finished_cell_and_resuming_gives_the_uninterrupted_numbers(tmp_path):
    overrides = ["--config.estimators=('positive',)", "--config.num_features=(2,4,8,16,32,64)"]
    command = [sys.executable, "-m", "experiments.mse", "--config=configs/performer_lemma2.py:quick", *overrides]
    process = subprocess.Popen([*command, f"--workdir={tmp_path / 'killed'}"], cwd=REPO, stderr=subprocess.DEVNULL)
    cells = tmp_path / "killed" / "cells"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cells.glob("*.json")) if cells.exists() else []) < 20:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = list(cells.glob("*.json"))
    assert 20 <= len(finished) < 6 * 10, "the run should be killed half-way"
    for path in finished:
        json.loads(path.read_text())  # every file there is complete
    for workdir in ("killed", "uninterrupted"):
        subprocess.run([*command, f"--workdir={tmp_path / workdir}"], cwd=REPO, check=True, capture_output=True)
    resumed, whole = (json.loads((tmp_path / w / "results.json").read_text()) for w in ("killed", "uninterrupted"))
    for record in resumed + whole:
        record.pop("seconds")
    assert resumed == whole


def test_main_job_command_prints_where_the_reports_are(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "experiments.reproduce", f"--workdir={tmp_path}", "--only=performer_fig2"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    index = tmp_path / "quick" / "report.md"
    assert str(index) in result.stdout
    assert "(performer_fig2/report.md)" in index.read_text()


def test_command_line_refuses_a_workdir_of_another_config(tmp_path):
    base = [sys.executable, "-m", "experiments.mse", "--config=configs/performer_fig2.py:quick"]
    base.append(f"--workdir={tmp_path}")
    first = ["--config.geometry.norms=(1.0,)", "--config.geometry.angles=(90.0,)"]
    subprocess.run([*base, *first], cwd=REPO, check=True, capture_output=True)
    before = sorted(p.name for p in (tmp_path / "cells").iterdir())
    result = subprocess.run([*base, "--config.geometry.norms=(2.0,)", "--config.geometry.angles=(90.0,)"], cwd=REPO,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1
    assert "holds results of a different config" in result.stderr and "geometry.norms" in result.stderr
    assert sorted(p.name for p in (tmp_path / "cells").iterdir()) == before


def test_an_override_that_drops_what_the_published_comparison_needs_gets_the_generic_analysis(tmp_path):
    config = performer_fig2.get_config("quick")
    config.estimators, config.geometry.angles, config.repetitions = ("positive",), (90.0,), 100
    report = _report(runner.run(config, str(tmp_path), progress=False))
    assert "needs {'estimators': ['trig']}" in report and "## Closed form vs Monte Carlo" in report


def test_benchmarks_write_json(tmp_path):
    subprocess.run([sys.executable, "-m", "experiments.benchmark_attention", "--lengths=64,128", "--repeats=1",
                    "--min_repeats=1", f"--output={tmp_path / 'attention.json'}", "--huge_pages=false"],
                   cwd=REPO, check=True, capture_output=True)  # fmt: skip
    attention = json.loads((tmp_path / "attention.json").read_text())
    assert [r["length"] for r in attention["results"]] == [64, 128]
    for result in attention["results"]:
        for case in ("exact", "bidir", "causal"):
            assert result["cases"][case]["median_ms"] > 0 and result["cases"][case]["memory"]["peak_bytes"] > 0
    subprocess.run([sys.executable, "-m", "experiments.benchmark_mse", "--variant=quick",
                    f"--output={tmp_path / 'mse.json'}"], cwd=REPO, check=True, capture_output=True)  # fmt: skip
    mse = json.loads((tmp_path / "mse.json").read_text())
    assert mse["feature_evaluations"] == 2000 * 14 * 2 * (128 + 64) and mse["feature_evaluations_per_second"] > 0
    subprocess.run([sys.executable, "-m", "experiments.benchmark_decoding", "--positions=8,32", "--steps=2",
                    "--repeats=1", f"--output={tmp_path / 'decoding.json'}"], cwd=REPO, check=True,
                   capture_output=True)  # fmt: skip
    decoding = json.loads((tmp_path / "decoding.json").read_text())["seconds_per_token"]
    assert set(decoding) == {"exact", "kernelized"} and all(t > 0 for d in decoding.values() for t in d.values())
