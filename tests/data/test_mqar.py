"""MQAR examples read back as the task defines them (Zoology's layout), and sizes that cannot hold it refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rfa.configs.tasks import mqar as mqar_configs
from rfa.data.mqar import check_sizes, example, mqar_config
from rfa.tasks import eval_batches, get_task, task_kind, train_batches
from rfa.train import check_config
from rfa.workdir import ConfigError


def _check_example(inputs, targets, vocab_size, num_pairs):
    """Reads an example as the task defines it, independently of the generator's indexing."""
    keys_end = 1 + (vocab_size - 1) // 2
    context = inputs[: 2 * num_pairs]
    keys, values = list(context[0::2]), list(context[1::2])
    assert all(1 <= k < keys_end for k in keys) and all(keys_end <= v < vocab_size for v in values)
    assert len(set(keys)) == num_pairs and len(set(values)) == num_pairs
    queries = np.flatnonzero(targets)
    assert len(queries) == num_pairs and queries.min() >= 2 * num_pairs
    assert all((q - 2 * num_pairs) % 2 == 0 for q in queries)  # a query opens a slot of two tokens
    assert sorted(inputs[q] for q in queries) == sorted(keys)  # every key queried once
    for q in queries:
        answer = values[keys.index(inputs[q])]
        assert targets[q] == answer and inputs[q + 1] == answer  # the value follows its query
    assert inputs.min() >= 1 and inputs.max() < vocab_size  # no padding inside


@pytest.mark.parametrize(("vocab_size", "num_pairs", "length"), [(256, 8, 64), (17, 8, 32), (32, 4, 33)])
def test_every_example_holds_pairs_then_each_key_queried_once(vocab_size, num_pairs, length):
    config = mqar_config(vocab_size, num_pairs, length)
    rng = np.random.default_rng(0)
    for _ in range(50):
        ex = example(rng, config)
        assert ex["inputs"].shape == ex["targets"].shape == (length,)
        _check_example(ex["inputs"], ex["targets"], vocab_size, num_pairs)


def test_queries_follow_the_power_law_close_to_the_context():
    config = mqar_config(256, 4, 200)  # 96 slots for 4 queries
    rng = np.random.default_rng(1)
    slots = np.concatenate([(np.flatnonzero(example(rng, config)["targets"]) - 8) // 2 for _ in range(2000)])
    # p(g) ∝ g^(a-1) with a = 0.01: the first slot is ~ 1/H of the mass, far above the uniform 1/96
    assert np.mean(slots == 0) > 4 / 96 and np.mean(slots < 10) > 2 * np.mean(slots >= 86)


def test_sizes_that_cannot_hold_the_task_are_clear_errors():
    with pytest.raises(ConfigError, match=r"num_pairs = 9 pairs need a length of at least 4 x 9 = 36.*max_length = 32"):
        check_sizes(vocab_size=256, num_pairs=9, length=32)
    with pytest.raises(ConfigError, match=r"vocab_size = 16 leaves 7 keys .* at least 17"):
        check_sizes(vocab_size=16, num_pairs=8, length=64)
    config = mqar_configs.get_config("exact")
    config.recall.num_pairs = 20  # 80 tokens needed, 64 given
    with pytest.raises(ConfigError, match=r"config\.recall\.num_pairs = 20"):
        check_config(config)


@pytest.mark.slow
def test_batches_come_from_the_configured_sizes_split_by_split(data_dir):
    task, sizes = get_task("mqar"), {"vocab_size": 40, "num_pairs": 5, "num_train": 64, "num_eval": 16}
    train = next(iter(train_batches(task, data_dir=data_dir, batch_size=8, max_length=24, seed=0, **sizes)))
    validation, test = (
        next(iter(eval_batches(task, data_dir=data_dir, batch_size=8, max_length=24, split=s, **sizes)))
        for s in ("validation", "test")
    )
    for batch in (train, validation, test):
        assert batch["inputs"].shape == batch["targets"].shape == (8, 24)
        for inputs, targets in zip(batch["inputs"], batch["targets"], strict=True):
            _check_example(inputs, targets, 40, 5)
    assert not np.array_equal(validation["inputs"], test["inputs"])
    again = next(iter(eval_batches(task, data_dir=data_dir, batch_size=8, max_length=24, split="test", **sizes)))
    np.testing.assert_array_equal(again["inputs"], test["inputs"])  # prepared once, read back the same


def test_recall_metrics_count_query_positions_only():
    config = mqar_config(32, 4, 24)
    rng = np.random.default_rng(3)
    examples = [example(rng, config) for _ in range(5)]
    batch = {key: jnp.asarray(np.stack([ex[key] for ex in examples])) for key in ("inputs", "targets")}

    def recalls_every_value(inputs):  # right at every query, wrong (id 1) at every other position
        del inputs
        return 10.0 * jax.nn.one_hot(jnp.where(batch["targets"] > 0, batch["targets"], 1), 32)

    sums = task_kind("recall").metric_sums(recalls_every_value, batch)
    assert float(sums["weight"]) == 5 * 4 and float(sums["correct"]) == 5 * 4
    assert task_kind("recall").summarize(jax.device_get(sums))["accuracy"] == 1.0
