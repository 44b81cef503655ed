"""The command lines of training as a user types them: bad input reported in one line (split from test_train.py so
that the two halves run on both test workers; the kernel comparison study runs end to end in docs/howto/training.md,
run by tests/test_docs.py). The commands run in turn in one subprocess (:func:`helpers.run_in_turn`)."""

import pytest
from helpers import lines, run_in_turn

TRAIN = ("rfa.experiments.train", "--config", "sort:positive,quick")


@pytest.mark.slow
def test_entry_points_report_bad_input_without_a_traceback(data_dir, tmp_path):
    work = ("--workdir", str(tmp_path / "w"))
    commands = [
        ["rfa.experiments.decode", "--workdir", str(tmp_path), "--input", "abc"],
        [*TRAIN, *work, "--config.task=nope"],
        [*TRAIN, *work, "--config.task=imdb_reviews", f"--config.data_dir={tmp_path / 'empty'}"],
        [*TRAIN, *work, "--config.num_trian_steps=3"],
        [*TRAIN, *work, "--config.model.d_modle=3"],
        [
            "rfa.experiments.train",
            "--config",
            "sunspots:positive,quick",
            "--workdir",
            str(tmp_path / "s"),
            "--config.max_length=400",
            f"--config.data_dir={data_dir}",
        ],
        [
            "rfa.experiments.studies.compare_kernels",
            "--config",
            "compare_kernels:quick",
            "--workdir",
            str(tmp_path),
            "--config.tasks=nope",
            "--output=",
        ],
    ]
    decode, task, dataset, field, nested, series, study = run_in_turn(commands)
    for done in (decode, task, dataset, field, nested, series, study):
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "is not a training workdir: it has no config.json" in decode.stderr
    assert "error: config.task: unknown task 'nope'" in task.stderr
    (line,) = lines(dataset.stderr)  # the error alone: no TFDS warning about the missing dataset before it
    assert "error: dataset 'imdb_reviews' (split 'train[:90%]') is not prepared" in line
    for done, typo, expected in (
        (field, "--config.num_trian_steps=3", "the config has no field 'num_trian_steps'"),
        (nested, "--config.model.d_modle=3", 'Did you mean "d_model"'),
    ):
        (line,) = lines(done.stderr)
        assert line.startswith(f"error: {typo}: ") and expected in line, done.stderr
    line = lines(series.stderr)[-1]  # after the line that says the series is being prepared
    assert "config.max_length = 400 plus config.model.horizon = 4" in line, series.stderr
    assert "rfa ships no task config 'nope'" in study.stderr
