"""The length-generalization study (quick) end to end: its longer-length accuracy against a plain recount."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from rfa.configs.studies import length_generalization
from rfa.experiments.studies.length_generalization import run, table
from rfa.tasks import eval_batches, get_task, shift_right
from rfa.train import load_model
from rfa.workdir import ConfigError


@pytest.mark.slow
def test_the_quick_study_evaluates_each_trained_model_once_on_the_longer_strings(data_dir, tmp_path):
    study = length_generalization.get_config("quick")
    study.data_dir = data_dir
    results = run(study, str(tmp_path))
    rows = results["rows"]
    assert [(r["attention"], r["positional"], r["seeds"]) for r in rows] == [
        ("positive", "sinusoidal", [0]),
        ("positive", "relative", [0]),
    ]
    model, config, _, _ = load_model(str(tmp_path / "positive" / "relative" / "seed_0"), max_length=72)
    assert config.model.positional == "relative"
    correct = total = repeated = 0
    batches = eval_batches(get_task("sort_longer"), data_dir=data_dir, split="test", batch_size=8, max_length=72)
    for batch in itertools.islice(batches, 4):  # the quick study's longer_batches
        logits = model(jnp.asarray(batch["inputs"]), shift_right(jnp.asarray(batch["targets"])))
        kept = batch["targets"] != 0
        correct += int(((np.asarray(logits).argmax(-1) == batch["targets"]) & kept).sum())
        repeated += int(((batch["targets"][:, 1:] == batch["targets"][:, :-1]) & kept[:, 1:]).sum())
        total += int(kept.sum())
    assert total > 4 * 8 * 33  # every string longer than any the model trained on
    assert rows[1]["longer"]["accuracy"] == {"mean": pytest.approx(correct / total, rel=1e-5), "std": 0.0, "n": 1}
    assert rows[1]["longer_runs"] == [
        {"seed": 0, **{k: rows[1]["longer"][k]["mean"] for k in ("accuracy", "sequence_accuracy")}}
    ]
    repeat = results["floors"]["repeat the previous symbol"]
    assert repeat == {"accuracy": pytest.approx(repeated / total), "sequence_accuracy": 0.0}
    assert 1 / 18 < results["floors"]["the majority symbol"]["accuracy"] < repeat["accuracy"]
    lines = table(results).splitlines()
    assert lines[2].startswith("| positive | sinusoidal | 1 |") and lines[3].startswith("| positive | relative | 1 |")
    assert lines[3].endswith("(sinusoidal) | not separated (1 seed) |")  # one seed: no test
    assert lines[4].startswith("| floor: repeat the previous symbol | - | - | - | - | ")


def test_a_longer_length_that_is_not_longer_is_refused(tmp_path):
    study = length_generalization.get_config("quick")
    study.longer_max_length = 24
    with pytest.raises(ConfigError, match="longer_max_length = 24 must exceed the training length max_length = 24"):
        run(study, str(tmp_path))
