"""End to end: every reproduction's quick variant, resuming, kill -9, and the main job's command line."""

import copy
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from helpers import non_progress_lines, own_estimators, run_module

from rfa import registered_estimators
from rfa.configs.sweeps import performer_fig2 as fig2_config
from rfa.experiments import reproduce
from rfa.experiments.common.report import fmt, select
from rfa.experiments.sweep_framework import registry, runner
from rfa.experiments.sweeps import (
    attention_output_error,
    derf_variance,
    hybrid_angle,
    kernel_mse,
    oprf_variance,
    orthogonal_vs_iid,
    performer_fig2,
    simplex_geometry,
    which_estimator_wins,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(name):
    return __import__(f"rfa.configs.sweeps.{name}", fromlist=["get_config"]).get_config("quick")


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
def main_job(tmp_path_factory):
    """``(index path, outputs per reproduction)`` of the main job's quick run, shared by the tests below."""
    return reproduce.run_all(
        registry.registered_reproductions(), "quick", str(tmp_path_factory.mktemp("reproduce")), progress=False
    )


@pytest.fixture(scope="module")
def reports(main_job):
    return main_job[1]


def _report(outputs):
    with open(outputs.report) as f:
        return f.read()


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_main_job_prepares_its_dataset_inside_its_workdir(main_job):
    workdir = os.path.dirname(os.path.dirname(main_job[0]))  # <workdir>/quick/report.md
    assert os.listdir(os.path.join(workdir, "data"))  # sort, for derf_variance's trained model: not ./data
    with open(os.path.join(workdir, "quick", "derf_variance", "config.json")) as f:
        assert json.load(f)["data_dir"] == os.path.join(workdir, "data")


@pytest.mark.slow
def test_lemma2_closed_forms_agree_with_monte_carlo(reports):
    agree, compared = _agreement(_report(reports["performer_lemma2"]))
    assert agree == compared > 30


@pytest.mark.slow
def test_fig2_reproduces_the_published_ratios(reports):
    report = _report(reports["performer_fig2"])
    assert _column(report, "within 5%") == ["yes"] * 5
    agree, compared = _agreement(report)
    assert agree == compared > 0


@pytest.mark.slow
def test_orthogonal_features_beat_iid_and_satisfy_theorem_2(reports):
    report = _report(reports["orthogonal_vs_iid"])
    assert set(_column(report, "ort ≤ iid")) == {"yes"}
    assert set(_column(report, "ort ≤ bound")) == {"yes", "—"} and "yes" in _column(report, "ort ≤ bound")
    agree, compared = _agreement(report)
    assert agree == compared > 0


@pytest.mark.slow
def test_oprf_variance_matches_chefs_random_tables(reports):
    report = _report(reports["oprf_variance"])
    assert _column(report, "within 0.1") == ["yes"] * 3
    records = reports["oprf_variance"].records
    assert any(r["repetitions"] == 0 for r in records) and any(r["repetitions"] > 0 for r in records)


@pytest.mark.slow
def test_attention_error_reproduces_the_input_scale_claims(reports):
    report = _report(reports["attention_output_error"])
    assert _column(report, "reproduced") == ["yes", "yes"]
    for record in reports["attention_output_error"].records:  # catastrophic: worse than averaging V
        if record["estimator"] == "trig" and record["input_scale"] == 1.0:
            assert record["mse"] > record["mean_of_v_mse"]


@pytest.mark.slow
def test_hybrid_worst_case_is_below_both_bases(reports):
    report = _report(reports["hybrid_angle"])
    assert _column(report, "below both") == ["yes", "yes"]
    assert _column(report, "hybrid / better base") == _column(report, "derived") == ["0.285", "0.137"]
    agree, compared = _agreement(report)
    assert agree == compared > 10


@pytest.mark.slow
def test_simplex_rows_beat_orthogonal_most_where_x_plus_y_is_small(reports):
    report = _report(reports["simplex_geometry"])
    sum_norm = [float(v) for v in _column(report, "‖x + y‖")]
    gain = [float(v) for v in _column(report, "simplex/orth")]
    assert all(g < 1 for g in gain) and gain[sum_norm.index(min(sum_norm))] < 0.1 < max(gain)
    assert all(float(v) < 1 for v in _column(report, "orth/iid"))
    agree, compared = _agreement(report)
    assert agree == compared > 0


@pytest.mark.slow
def test_the_winner_map_names_the_lowest_mse_at_every_point(reports):
    records = reports["which_estimator_wins"].records
    for point in which_estimator_wins.winners(records):
        cells = select(records, norm=point["norm"], angle=point["angle"])
        lowest = min(r["mse_theory"] for r in cells if not math.isnan(r["mse_theory"]))
        winner = next(r for r in cells if (r["estimator"], r["projection"]) == point["winner"])
        assert winner["mse_theory"] == lowest and point["margin"] >= 1
    assert "trig" in _column(_report(reports["which_estimator_wins"]), "winner")  # exact at angle 0


@pytest.mark.slow
def test_derf_fits_order_the_variance_as_their_nesting_says(reports):
    records = reports["derf_variance"].records
    for dataset in ("anisotropic", "trained_model"):
        objective = {r["estimator"]: r["objective"] for r in records if r["dataset_name"] == dataset}
        assert objective["positive"] > objective["oprf"] > objective["saderf"] > objective["aderf"], objective
        assert objective["oprf"] > objective["sderf"], objective
    assert sum(r["pairs_compared"] for r in records) == sum(r["pairs_agreeing"] for r in records) > 10
    assert {r["heads"] for r in records if r["dataset_name"] == "trained_model"} == {2}  # sort's quick model's heads


def _fig2_ratio(length, degrees):
    """Performer Fig. 2's closed-form ratio MSE_trig / MSE_positive at |x| = |y| = length (docs/references.md)."""
    c = math.cos(math.radians(degrees))
    l2 = length**2
    return math.exp(-4 * l2 * c) * (1 - math.exp(-2 * l2 * (1 - c))) ** 2 / (2 * (1 - math.exp(-2 * l2 * (1 + c))))


@pytest.mark.slow
def test_the_index_opens_with_one_verdict_per_reproduction(main_job):
    index, outputs = main_job
    with open(index) as f:
        title, verdicts, *_ = f.read().split("\n\n")
    lines = verdicts.splitlines()
    assert title == "# rfa reproductions (quick variants)" and len(lines) == len(registry.registered_reproductions())
    for name, line in zip(registry.registered_reproductions(), lines, strict=True):
        assert line.startswith(f"- {name} — reproduced: ")
        assert line == f"- {outputs[name].verdict.line(name)}"
        assert _report(outputs[name]).split("\n\n")[1] == f"**{line[2:]}**"  # the report opens with the same line
    fig2, crt = (lines[registry.registered_reproductions().index(name)] for name in ("performer_fig2", "oprf_variance"))
    for length, degrees, published in [(1, 90, "0.43"), (1, 150, "65"), (2, 150, "7.9e+05")]:
        assert f"{fmt(_fig2_ratio(length, degrees))} at l = {length}, {degrees}° (published {published})" in fig2
    assert "trig 15.3 (published 15.3), positive 32 (published 32), oprf 23.7 (published 23.7)" in crt


MEASURED = ("mse_theory", "log_mse_theory", "mse_monte_carlo", "standard_error", "mse")  # every MSE of a cell


def _off(records, factor, fields, **where):
    """A copy of ``records`` whose cells matching ``where`` have their MSE ``fields`` times ``factor``."""
    records = copy.deepcopy(records)
    for record in select(records, **where):
        for field in set(fields) & set(record):
            record[field] = record[field] + math.log(factor) if field.startswith("log") else record[field] * factor
    return records


VERDICTS = {  # each reproduction's verdict as a function of its records (m = 64 and d = 64 are the quick configs')
    "performer_lemma2": kernel_mse.agreement_verdict,
    "performer_fig2": lambda records: performer_fig2.fig2_verdict(records, 64),
    "orthogonal_vs_iid": orthogonal_vs_iid.orthogonal_verdict,
    "oprf_variance": lambda records: oprf_variance.crt_verdict(records, 64),
    "attention_output_error": attention_output_error.input_scale_verdict,
    "hybrid_angle": lambda r: hybrid_angle.hybrid_verdict(r, hybrid_angle.hybrid_worst_cases(_config("hybrid_angle"))),
    "simplex_geometry": lambda r: simplex_geometry.simplex_verdict(
        r, simplex_geometry.simplex_ratios(r, "positive", 16)
    ),
    "which_estimator_wins": lambda records: which_estimator_wins.winner_verdict(
        records, which_estimator_wins.winners(records)
    ),
    "derf_variance": derf_variance.derf_verdict,
}


# (reproduction, cells, factor on their MSEs, which MSEs, what the claim then says). Where Monte Carlo is scaled
# with the closed form the two still agree, so only the published comparison can turn the verdict.
OFF_CASES = [
    # a closed form 1.5x off disagrees with Monte Carlo: fewer cells agree than are compared
    ("performer_lemma2", {"estimator": "positive", "m": 64}, 1.5, ["mse_theory"], r"\b(\d+)/(?!\1 )\d+ compared cells"),
    # the ratio at (l = 1, 90°) 10% above the published 0.43 (the tolerance is 5%)
    ("performer_fig2", {"estimator": "trig", "norm": 1.0, "angle": 90.0}, 1.1, MEASURED, r"0\.476 at l = 1, 90° \("),
    # iid MSEs halved: orthogonal features no longer beat them
    ("orthogonal_vs_iid", {"projection": "iid", "m": 4}, 0.5, MEASURED, r"below iid at (\d+)/(?!\1 )\d+ \(pair, m\)"),
    ("oprf_variance", {"estimator": "oprf"}, math.exp(0.2), MEASURED, r"oprf 23\.9 \(published 23\.7\)"),
    # trig 1000x better at s = 1: worse than positive by less than 100x, so not "catastrophic"
    ("attention_output_error", {"estimator": "trig", "input_scale": 1.0}, 1e-3, MEASURED, r"s = 1 \S+ \(published"),
    # hybrid's closed form 1.5x off disagrees with Monte Carlo
    ("hybrid_angle", {"estimator": "hybrid"}, 1.5, ["mse_theory"], r"\b(\d+)/(?!\1 )\d+ compared cells"),
    # simplex MSEs 30x larger: no longer below orthogonal rows
    ("simplex_geometry", {"projection": "simplex"}, 30.0, MEASURED, r"at (\d+)/(?!\1 )\d+ pairs"),
    # Monte Carlo of a winner 10x off: the measured winner changes
    (
        "which_estimator_wins",
        {"estimator": "oprf", "projection": "simplex", "norm": 0.5, "angle": 90.0},
        10.0,
        ["mse_monte_carlo", "standard_error"],
        r"Monte Carlo at (\d+) of the (?!\1 )\d+ points",
    ),
    # ADERF's objective doubled on the anisotropic set: above SADERF's, which nests inside it
    (
        "derf_variance",
        {"estimator": "aderf", "dataset_name": "anisotropic"},
        2.0,
        ["objective"],
        r"anisotropic: aderf [\d.]+ > positive",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "where", "factor", "fields", "claim"), OFF_CASES, ids=[c[0] for c in OFF_CASES])
def test_a_verdict_turns_to_not_reproduced_when_a_measured_value_is_off(reports, name, where, factor, fields, claim):
    records = reports[name].records
    assert VERDICTS[name](records) == reports[name].verdict and reports[name].verdict.reproduced
    off = VERDICTS[name](_off(records, factor, fields, **where))
    assert not off.reproduced and re.search(claim, off.claim), off.claim
    assert off.line(name).startswith(f"{name} — not reproduced: ")


@pytest.mark.slow
def test_rerun_resumes_without_recomputing(tmp_path, monkeypatch):
    config = fig2_config.get_config("quick")
    first = runner.run(config, str(tmp_path), progress=False)
    os.remove(os.path.join(tmp_path, "cells", "trig_iid_m64_norm1_angle150.json"))
    computed = []
    kind = registry.experiment_kind("kernel_mse")

    def counting(config, group, context, done):
        for cell, record in kind.measure(config, group, context, done):
            computed.append(cell.name)
            yield cell, record

    monkeypatch.setattr(registry, "experiment_kind", lambda name: dataclasses.replace(kind, measure=counting))
    second = runner.run(config, str(tmp_path), progress=False)
    assert computed == ["trig_iid_m64_norm1_angle150"]
    for record in first.records + second.records:
        record.pop("seconds")
    assert second.records == first.records  # the group's chunk is recomputed whole: the same bits


@pytest.mark.slow
def test_kill_9_loses_no_finished_cell_and_resuming_gives_the_uninterrupted_numbers(tmp_path):
    overrides = ["--config.estimators=('positive',)", "--config.num_features=(2,4,8,16,32,64)"]
    command = [sys.executable, "-m", "rfa.experiments.sweep", "--config=performer_lemma2:quick", *overrides]
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
    config = _config("performer_lemma2")  # the command's config; resumed and run whole in this process
    config.estimators, config.num_features = ("positive",), (2, 4, 8, 16, 32, 64)
    for workdir in ("killed", "uninterrupted"):
        runner.run(config, str(tmp_path / workdir), progress=False)
    resumed, whole = (json.loads((tmp_path / w / "results.json").read_text()) for w in ("killed", "uninterrupted"))
    for record in resumed + whole:
        record.pop("seconds")
    assert resumed == whole


@pytest.mark.slow
def test_main_job_command_prints_verdicts_and_where_the_reports_are_without_library_noise(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rfa.experiments.reproduce", f"--workdir={tmp_path}", "--only=performer_fig2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    index = tmp_path / "quick" / "report.md"
    verdict, report, blank, last = result.stdout.split("\n")[:4]
    assert verdict.startswith("performer_fig2 — reproduced: ratio MSE_trig / MSE_positive 0.432 at l = 1, 90°")
    assert (report, blank, last) == (
        f"    {tmp_path / 'quick' / 'performer_fig2' / 'report.md'}",
        "",
        f"Index of the reports and figures: {index}",
    )
    assert f"- {verdict}" in index.read_text() and "(performer_fig2/report.md)" in index.read_text()
    # stderr holds the progress bar and nothing else: no JAX backend probe, no absl INFO lines
    assert non_progress_lines(result.stderr, "performer_fig2") == []


@pytest.mark.slow
def test_command_line_refuses_a_workdir_of_another_config(tmp_path):
    config = fig2_config.get_config("quick")  # the command's config below, with 1.0 in place of its norm 2.0
    config.geometry.norms, config.geometry.angles = (1.0,), (90.0,)
    runner.run(config, str(tmp_path), progress=False)  # in this process: the main job compiled its programs here
    before = sorted(p.name for p in (tmp_path / "cells").iterdir())
    overrides = ["--config.geometry.norms=(2.0,)", "--config.geometry.angles=(90.0,)"]
    result = run_module("rfa.experiments.sweep", "--config=performer_fig2:quick", f"--workdir={tmp_path}", *overrides)
    assert result.returncode == 1
    assert "holds results of a different config" in result.stderr and "geometry.norms" in result.stderr
    assert sorted(p.name for p in (tmp_path / "cells").iterdir()) == before


@pytest.mark.slow
def test_an_override_that_drops_what_the_published_comparison_needs_gets_the_generic_analysis(tmp_path):
    config = fig2_config.get_config("quick")
    config.estimators, config.geometry.angles, config.repetitions = ("positive",), (90.0,), 100
    report = _report(runner.run(config, str(tmp_path), progress=False))
    assert "needs {'estimators': ['trig']}" in report and "## Closed form vs Monte Carlo" in report


USER_ESTIMATORS = '''
"""A user's estimators: positive features written anew (no closed form given) and a deterministic map."""
import math

import jax

import rfa
from rfa.random_features.feature_maps import Estimator, half_sq_norm, no_log, project


def _my_positive(x, W):
    return None, project(x, W) - half_sq_norm(x) - 0.5 * math.log(W.shape[0])


rfa.register_estimator(Estimator("my_positive", _my_positive, "softmax", 1, temperature_scaled=True, positive=True))
rfa.register_estimator(Estimator("my_elu", lambda x, W: no_log(jax.nn.elu(x) + 1.0), None, 0, False, positive=True))
'''


@pytest.mark.slow
def test_a_users_estimators_run_from_a_module_named_in_the_config(tmp_path, monkeypatch):
    """Register, sweep, see Monte Carlo without a closed form: the path the README shows. The worker forgets the
    estimators after (and the module that registered them)."""
    (tmp_path / "my_estimators.py").write_text(USER_ESTIMATORS)
    monkeypatch.syspath_prepend(str(tmp_path))
    with own_estimators():
        try:
            _run_a_users_estimators(tmp_path)
        finally:
            sys.modules.pop("my_estimators", None)
    assert "my_positive" not in registered_estimators()


def _run_a_users_estimators(tmp_path):
    config = fig2_config.get_config("quick")
    config.modules, config.estimators, config.repetitions = ("my_estimators",), ("positive", "my_positive"), 400
    config.num_features, config.geometry.norms, config.geometry.angles = (16,), (1.0,), (30.0, 150.0)
    outputs = runner.run(config, str(tmp_path / "kernel"), progress=False)
    mine = select(outputs.records, estimator="my_positive")
    theirs = select(outputs.records, estimator="positive")
    assert len(mine) == 2 and all(math.isnan(r["mse_theory"]) for r in mine)
    for r, reference in zip(mine, theirs, strict=True):  # the same estimator: Monte Carlo meets positive's closed form
        assert abs(r["mse_monte_carlo"] - reference["mse_theory"]) < 4 * r["standard_error"]
    report = _report(outputs)
    assert "no closed form" in report and outputs.verdict is None  # a custom sweep: no verdict, and it says so
    assert "**Custom sweep of performer_fig2, no verdict**: it differs from the shipped configurations in" in report
    assert "estimators, geometry.angles, geometry.norms, num_features, repetitions" in report
    assert "reproduced" not in report.split("\n\n")[1]
    config = _config("attention_output_error")
    config.modules, config.estimators, config.num_features = ("my_estimators",), ("my_elu", "positive"), (16,)
    config.projections, config.input_scales, config.length = ("iid",), (0.5,), 64
    records = runner.run(config, str(tmp_path / "attention"), progress=False).records
    assert {r["estimator"] for r in records} == {"my_elu", "positive"} and all(r["mse"] > 0 for r in records)
