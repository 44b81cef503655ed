"""The command lines of training as a user types them: bad input reported in one line, and the kernel comparison
study end to end (split from test_train.py so that the two halves run on both test workers)."""

import json

import numpy as np
import pytest
from helpers import lines, run_module


@pytest.mark.slow
def test_entry_points_report_bad_input_without_a_traceback(data_dir, tmp_path):
    done = run_module("rfa.experiments.decode", "--workdir", str(tmp_path), "--input", "abc")
    assert done.returncode != 0 and "is not a training workdir: it has no config.json" in done.stderr
    done = run_module(
        "rfa.experiments.train",
        "--config",
        "sort:positive,quick",
        "--workdir",
        str(tmp_path / "w"),
        "--config.task=nope",
    )
    assert done.returncode != 0 and "error: config.task: unknown task 'nope'" in done.stderr
    done = run_module(
        "rfa.experiments.train",
        "--config",
        "sort:positive,quick",
        "--workdir",
        str(tmp_path / "w"),
        "--config.task=imdb_reviews",
        f"--config.data_dir={tmp_path / 'empty'}",
    )
    (line,) = lines(done.stderr)  # the error alone: no TFDS warning about the missing dataset before it
    assert done.returncode != 0 and "error: dataset 'imdb_reviews' (split 'train[:90%]') is not prepared" in line
    for typo, expected in (
        ("--config.num_trian_steps=3", "the config has no field 'num_trian_steps'"),
        ("--config.model.d_modle=3", 'Did you mean "d_model"'),
    ):
        done = run_module(
            "rfa.experiments.train",
            "--config",
            "sort:positive,quick",
            "--workdir",
            str(tmp_path / "w"),
            typo,
        )
        (line,) = lines(done.stderr)
        assert done.returncode != 0 and line.startswith(f"error: {typo}: ") and expected in line, done.stderr
    done = run_module(
        "rfa.experiments.train",
        "--config",
        "sunspots:positive,quick",
        "--workdir",
        str(tmp_path / "s"),
        "--config.max_length=400",
        f"--config.data_dir={data_dir}",
    )
    line = lines(done.stderr)[-1]  # after the line that says the series is being prepared
    assert done.returncode != 0 and "config.max_length = 400 plus config.model.horizon = 4" in line, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_compare_kernels_trains_every_pair_and_writes_the_table(data_dir, tmp_path):
    output = tmp_path / "table.json"
    run_module(
        "rfa.experiments.studies.compare_kernels",
        "--config",
        "compare_kernels:quick",
        "--workdir",
        str(tmp_path),
        f"--config.data_dir={data_dir}",
        f"--output={output}",
        check=True,
    )
    rows = (tmp_path / "table.md").read_text().splitlines()
    assert [row.split(" | ")[:4] for row in rows[2:]] == [
        ["| sort", "exact", "-", "2"],
        ["| sort", "positive", "8", "2"],  # the quick variant's num_features_of, in place of the config's 16
    ]
    results = json.loads(output.read_text())
    assert [(r["attention"], r["seeds"]) for r in results] == [("exact", [0, 1]), ("positive", [0, 1])]
    accuracies = [run["test"]["accuracy"] for run in results[1]["runs"]]
    losses = [run["test"]["loss"] for run in results[1]["runs"]]
    assert losses[0] != losses[1]  # the seeds are different runs
    assert results[1]["test"]["accuracy"]["mean"] == pytest.approx(np.mean(accuracies))
    assert (tmp_path / "sort" / "positive" / "seed_1" / "results.json").exists()
    assert (tmp_path / "table.png").stat().st_size > 10_000
    done = run_module(
        "rfa.experiments.studies.compare_kernels",
        "--config",
        "compare_kernels:quick",
        "--workdir",
        str(tmp_path),
        "--config.tasks=nope",
        "--output=",
    )
    assert done.returncode != 0 and "rfa ships no task config 'nope'" in done.stderr
