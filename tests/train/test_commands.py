"""The command lines of training as a user types them: bad input reported in one line (split from test_train.py so
that the two halves run on both test workers; the kernel comparison study runs end to end in docs/howto/training.md,
run by tests/test_docs.py)."""

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
