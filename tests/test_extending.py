"""Adding a task kind, an estimator and a reproduction is one module each, registered, and runs through the
documented entry points: from a directory outside the checkout, a module named in ``config.modules`` (or
``--modules``) is imported from the current directory, and the shipped configs are found by their names.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # trains a model and runs two sweeps in subprocesses

TOY = '''
"""A user's module: a task kind, an estimator and a reproduction, each registered once."""

import math

import jax
import jax.numpy as jnp
import numpy as np

import rfa
from rfa.experiments.common.report import Analysis, Verdict, select
from rfa.experiments.sweeps import Reproduction, register_reproduction
from rfa.data.pipeline import pad
from rfa.data.tokenizers import PAD_ID, ByteTokenizer
from rfa.models import Encoder
from rfa.random_features.feature_maps import half_sq_norm, project
from rfa.tasks import Task, TaskKind, register_task, register_task_kind
from rfa.tasks.common import cross_entropy_sums, cross_entropy_summary, transformer_config


class FirstLetter(TaskKind):
    """Is the first letter of a string in the first half of the alphabet? (the sort task's strings)"""

    name = "first_letter"
    description = "a first-letter classifier"

    def examples(self, task, dataset, *, max_length):
        encode = task.tokenizer.encode

        def example(ex):
            text = ex[task.inputs]
            first = (text if isinstance(text, str) else text.decode())[0]
            return {"inputs": pad(encode(text)[:max_length], max_length), "label": np.int32(first < "n"),
                    "weight": np.float32(1)}

        return dataset.map(example).to_iter_dataset()

    def model_config(self, config, task, attention, *, sequence_axis):
        return transformer_config(config, task, attention, sequence_axis=sequence_axis)

    def build_model(self, model_config, rngs):
        return Encoder(model_config, rngs=rngs)

    def forward(self, model, batch):
        return model(batch["inputs"]), batch["label"], batch["weight"]

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        sums, _ = cross_entropy_sums(*self.forward(model, batch), label_smoothing=label_smoothing)
        return sums | {"tokens": (batch["inputs"] != PAD_ID).sum().astype(jnp.float32)}

    def summarize(self, sums):
        metrics = cross_entropy_summary(sums)
        return metrics | {"error_rate": 1.0 - metrics["accuracy"]}


register_task_kind(FirstLetter())
register_task("first_letter_sort", Task("algorithmic/sort", "first_letter", "inputs", None, ByteTokenizer(),
                                        num_classes=2, generated=True))


def scaled_positive(x, W, *, sharpness=1.0):
    """Positive features of sharpness * x at the same temperature: exactly positive features at sharpness 1."""
    x = sharpness * x
    return None, project(x, W) - half_sq_norm(x) - 0.5 * math.log(W.shape[0])


rfa.register_estimator(rfa.Estimator(
    "scaled_positive", scaled_positive, "softmax", 1, temperature_scaled=True, positive=True,
    params=(rfa.Param("sharpness"),),
))


def analyze(config, records, workdir):
    """scaled_positive at sharpness 1 is positive features: its Monte Carlo MSE meets positive's closed form."""
    z = []
    for mine in select(records, estimator="scaled_positive"):
        theory = select(records, estimator="positive", angle=mine["angle"])[0]["mse_theory"]
        z.append(abs(mine["mse_monte_carlo"] - theory) / mine["standard_error"])
    claim = f"scaled_positive's Monte Carlo within 4 SE of positive's closed form at {sum(v < 4 for v in z)}/{len(z)}"
    return Analysis(Verdict(all(v < 4 for v in z), claim), ["## Toy", claim])


register_reproduction(Reproduction("toy_agreement", "kernel_mse", analyze, config="toy_sweep"))
'''

SWEEP_CONFIG = """
from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "toy_agreement"
    config.modules = ("toy_extensions",)
    config.estimators = ("positive", "scaled_positive")
    config.num_features = (16,)
    config.geometry.norms = (1.0,)
    config.geometry.angles = (30.0, 120.0)
    config.repetitions = 400
    return apply_variant(config, arg, {"full": {}, "quick": {"repetitions": 300}})
"""

TRAIN_CONFIG = """
from rfa.configs.common import task_config


def get_config(arg=None):
    config = task_config("sort", "positive,quick")
    config.task = "first_letter_sort"
    config.modules = ("toy_extensions",)
    config.attention.kind = "scaled_positive"
    return config
"""


def _run(args, cwd, data_dir=None):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A directory outside the checkout holding the user's module and configs (kept apart: a config file is loaded
    by its path, so registrations in it would run twice)."""
    path = tmp_path_factory.mktemp("user")
    (path / "toy_extensions.py").write_text(textwrap.dedent(TOY))
    (path / "toy_train.py").write_text(textwrap.dedent(TRAIN_CONFIG))
    (path / "toy_sweep.py").write_text(textwrap.dedent(SWEEP_CONFIG))
    return path


def test_a_toy_task_kind_and_estimator_train_through_experiments_train(outside, data_dir):
    _run(
        [
            "rfa.experiments.train",
            "--config",
            "toy_train.py",
            "--workdir",
            "train",
            f"--config.data_dir={data_dir}",
            "--config.num_train_steps=4",
        ],
        outside,
    )
    results = json.loads((outside / "train" / "results.json").read_text())
    assert results["kind"] == "first_letter" and results["steps"] == 4
    assert results["test"]["error_rate"] == pytest.approx(1 - results["test"]["accuracy"])
    assert 0 <= results["test"]["accuracy"] <= 1 and results["num_features"] == 16  # the quick scale's m


def test_a_toy_reproduction_runs_through_experiments_mse_and_reproduce(outside):
    _run(["rfa.experiments.sweep", "--config", "toy_sweep.py:quick", "--workdir", "sweep"], outside)
    report = (outside / "sweep" / "report.md").read_text()
    assert "toy_agreement — reproduced: scaled_positive's Monte Carlo within 4 SE" in report
    _run(
        ["rfa.experiments.reproduce", "--modules=toy_extensions", "--only=toy_agreement", "--workdir=reproduce"],
        outside,
    )
    index = (outside / "reproduce" / "quick" / "report.md").read_text()
    assert "- toy_agreement — reproduced" in index


def test_shipped_configs_run_from_outside_the_checkout(outside):
    """The README's commands name configs/<name>.py; outside the checkout the installed configs answer."""
    one_cell = ["--config.repetitions=20", "--config.geometry.norms=(1.0,)", "--config.geometry.angles=(90.0,)"]
    _run(
        [
            "rfa.experiments.sweep",
            "--config",
            "performer_fig2:quick",
            "--workdir",
            "fig2",
            *one_cell,
        ],
        outside,
    )
    records = json.loads((outside / "fig2" / "results.json").read_text())
    assert {r["estimator"] for r in records} == {"trig", "positive"} and len(records) == 2
    done = subprocess.run(
        [sys.executable, "-m", "rfa.experiments.sweep", "--config", "configs/nope.py", "--workdir", "x"],
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "configs/nope.py" in done.stderr
