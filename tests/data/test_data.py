"""The project's TFDS builders, the task registry, tokenizers and the grain pipelines."""

import random

import numpy as np
import pytest
import tensorflow_datasets as tfds

import rfa.data as data
import rfa.tasks as tasks
from rfa.data import listops
from rfa.data.algorithmic import TRANSFORMS
from rfa.data.python_source import split_of


def _examples(name, split, data_dir, count=200):
    source = data.load_source(tasks.get_task(name), split, data_dir)
    return [source[i] for i in range(min(count, len(source)))], len(source)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_algorithmic_examples_follow_their_task(name, data_dir):
    examples, size = _examples(name, "train", data_dir)
    assert size == 20_000
    for example in examples:
        inputs, targets = example["inputs"].decode(), example["targets"].decode()
        assert 2 <= len(inputs) <= 32 and set(inputs) <= set("abcdefghijklmnop")
        assert targets == {"copy": inputs, "reverse": inputs[::-1], "sort": "".join(sorted(inputs))}[name]
    validation, validation_size = _examples(name, "validation", data_dir)
    assert validation_size == 1000 and [e["inputs"] for e in validation] != [e["inputs"] for e in examples]


def test_longer_strings_lie_beyond_every_training_length(data_dir):
    examples, size = _examples("sort_longer", "test", data_dir)
    assert size == 1000
    lengths = [len(example["inputs"]) for example in examples]
    assert min(lengths) >= 33 and max(lengths) <= 64 and max(lengths) > 56
    assert all(example["targets"].decode() == "".join(sorted(example["inputs"].decode())) for example in examples)


@pytest.mark.slow
def test_listops_labels_are_the_values_of_their_expressions(data_dir):
    examples, size = _examples("listops", "train", data_dir, count=500)
    assert size == 20_000
    labels = []
    for example in examples:
        text = example["source"].decode()
        assert 16 <= len(text.split()) <= 128
        assert listops.evaluate(text) == example["label"]
        labels.append(example["label"])
    assert len(set(labels)) == 10  # every answer occurs


def test_the_cpu_scale_of_listops_keeps_max_and_min_at_small_depth():
    (config,) = [c for c in listops.Listops.BUILDER_CONFIGS if c.name == "cpu"]
    rng = random.Random(0)
    for _ in range(200):
        tokens, value = listops.expression(rng, rng.randint(config.min_length, config.max_length), 1, config)
        assert len(tokens) <= config.max_length and listops.evaluate(" ".join(tokens)) == value
        assert {t for t in tokens if t.startswith("[")} <= {"[MAX", "[MIN"}
        depth = deepest = 0
        for token in tokens:
            depth += token.startswith("[") - (token == "]")
            deepest = max(deepest, depth)
        assert deepest <= config.max_depth


def test_listops_generator_reaches_lra_lengths_and_depth():
    config = listops.ListOpsConfig(name="test")
    rng = random.Random(0)
    for _ in range(5):
        tokens, value = listops.expression(rng, 1500, 1, config)
        assert 1000 < len(tokens) <= 1500 and listops.evaluate(" ".join(tokens)) == value
    assert listops.evaluate("[MAX 2 9 [MIN 4 7 ] 0 ]") == 9
    assert listops.evaluate("[MED 1 5 2 8 ]") == 3 and listops.evaluate("[SM 9 8 ]") == 7


@pytest.mark.slow
def test_python_source_splits_by_file(data_dir):
    splits = {
        split: _examples("python_source", split, data_dir, count=10_000) for split in ("train", "validation", "test")
    }
    (_, train_size), (_, validation_size), (_, test_size) = splits.values()
    assert train_size > 300 and 20 < validation_size < train_size / 4 and 20 < test_size < train_size / 4
    paths = {split: {e["path"].decode() for e in examples} for split, (examples, _) in splits.items()}
    assert sum(map(len, paths.values())) == len(set().union(*paths.values()))  # each file in one split
    assert all(split_of(path) == split for split, names in paths.items() for path in names)
    assert "json/decoder.py" in paths["train"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("sort", {"inputs", "targets"}),
        ("listops", {"inputs", "label", "weight"}),
        ("python_source", {"inputs", "targets"}),
    ],
)
def test_train_batches_have_static_shapes_and_resume_from_their_state(name, keys, data_dir):
    task = tasks.get_task(name)
    make = lambda seed: iter(tasks.train_batches(task, data_dir=data_dir, batch_size=4, max_length=48, seed=seed))  # noqa: E731
    first, second = make(0), make(0)
    batch = next(first)
    assert set(batch) == keys and batch["inputs"].shape == (4, 48) and batch["inputs"].dtype == np.int32
    assert all(np.array_equal(batch[k], v) for k, v in next(second).items())
    assert not np.array_equal(next(make(1))["inputs"], batch["inputs"])
    state = first.get_state()
    expected = [next(first) for _ in range(3)]
    resumed = make(0)
    resumed.set_state(state)
    for want in expected:
        assert all(np.array_equal(want[k], v) for k, v in next(resumed).items())


def _concatenated(parts: list[dict]) -> dict:
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


@pytest.mark.parametrize(("name", "reads"), [("listops", "its rows"), ("sort", "every row")])
def test_processes_build_the_global_batches_of_one_process_each_reading_its_rows(name, reads, data_dir):
    """2 or 4 processes' blocks, side by side, are the batches of one process (training: a resumed one too;
    evaluation: the padded last batch of a split whose size no batch divides); a task whose examples are its rows
    (listops) has each process read only its rows, one that drops examples by their length (sort) reads them all."""
    task = tasks.get_task(name)
    sizes = dict(data_dir=data_dir, batch_size=8, max_length=48)
    one = iter(tasks.train_batches(task, seed=0, **sizes))
    want = [next(one) for _ in range(3)]
    for count in (2, 4):
        its = [iter(tasks.train_batches(task, seed=0, shard=(p, count), **sizes)) for p in range(count)]
        before = data.examples_read()
        got = [_concatenated([next(it) for it in its]) for _ in range(2)]
        per_process = (data.examples_read() - before) / (2 * count)
        assert per_process == (8 / count if reads == "its rows" else 8)
        position = data.global_position(its[0].get_state(), (0, count), rows_are_examples=reads == "its rows")
        resumed = iter(tasks.train_batches(task, seed=0, **sizes))  # on one process
        resumed.set_state(data.local_position(position, (0, 1), rows_are_examples=reads == "its rows"))
        for a, b in zip([*got, next(resumed)], want, strict=True):
            assert all(np.array_equal(a[key], b[key]) for key in b)
    # 1000 validation examples: the last of 8 batches of 128 holds 104
    sizes |= dict(batch_size=128, split="validation")
    whole = list(tasks.eval_batches(task, **sizes))
    parts = [list(tasks.eval_batches(task, shard=(p, 4), **sizes)) for p in range(4)]
    assert [len(p) for p in parts] == [len(whole)] * 4
    for j, batch in enumerate(whole):
        assert all(np.array_equal(_concatenated([p[j] for p in parts])[k], v) for k, v in batch.items())


def test_a_position_that_does_not_split_over_the_processes_is_refused():
    assert data.local_position({"next_index": 48}, (0, 4), rows_are_examples=True) == {"next_index": 12}
    with pytest.raises(ValueError, match="does not split over 5 processes"):
        data.local_position({"next_index": 48}, (0, 5), rows_are_examples=True)
    assert data.local_position({"next_index": 7}, (0, 5), rows_are_examples=False) == {"next_index": 7}


@pytest.mark.slow
def test_seq2seq_batches_end_targets_with_eos_and_drop_long_pairs(data_dir):
    task = tasks.get_task("reverse")
    batch = next(iter(tasks.train_batches(task, data_dir=data_dir, batch_size=64, max_length=12, seed=0)))
    for inputs, targets in zip(batch["inputs"], batch["targets"], strict=True):
        n = int((inputs != data.PAD_ID).sum())
        assert n <= 11 and targets[n] == data.EOS_ID and (targets[n + 1 :] == data.PAD_ID).all()
        assert task.tokenizer.decode(targets) == task.tokenizer.decode(inputs)[::-1]


def test_lm_windows_are_shifted_by_one_and_contiguous(data_dir):
    task = tasks.get_task("python_source")
    batches = iter(tasks.train_batches(task, data_dir=data_dir, batch_size=2, max_length=32, seed=0))
    batch = next(batches)
    np.testing.assert_array_equal(batch["inputs"][:, 1:], batch["targets"][:, :-1])
    assert (batch["inputs"] != data.PAD_ID).all()


@pytest.mark.slow
def test_eval_batches_are_one_padded_pass(data_dir):
    task = tasks.get_task("listops")
    batches = list(tasks.eval_batches(task, data_dir=data_dir, batch_size=64, max_length=128))
    assert len(batches) == 32 and all(b["inputs"].shape == (64, 128) for b in batches)
    last = batches[-1]
    assert sum(b["weight"].sum() for b in batches) == 2000 and last["weight"][16:].sum() == 0
    assert (last["inputs"][16:] == data.PAD_ID).all() and (last["inputs"][:16, 0] != data.PAD_ID).all()
    assert len(list(tasks.eval_batches(task, data_dir=data_dir, batch_size=8, max_length=128, max_batches=3))) == 3


def test_real_tfds_datasets_load_through_the_same_pipeline():
    with tfds.testing.mock_data(num_examples=6):
        batch = next(
            iter(
                tasks.train_batches(
                    tasks.get_task("imdb_reviews"), data_dir="unused", batch_size=3, max_length=16, seed=0
                )
            )
        )
        assert batch["inputs"].shape == (3, 16) and set(np.unique(batch["label"])) <= {0, 1}
        lm = next(iter(tasks.eval_batches(tasks.get_task("lm1b"), data_dir="unused", batch_size=2, max_length=8)))
        assert lm["inputs"].shape == (2, 8)
        np.testing.assert_array_equal(lm["inputs"][:, 1:], lm["targets"][:, :-1])


def test_a_missing_dataset_says_how_to_prepare_it(tmp_path):
    with pytest.raises(data.DatasetMissingError, match=r"tfds build imdb_reviews --data_dir=.*array_record"):
        tasks.train_batches(tasks.get_task("imdb_reviews"), data_dir=str(tmp_path), batch_size=2, max_length=8, seed=0)


def test_tokenizers_round_trip():
    tokenizer = data.ByteTokenizer()
    ids = tokenizer.encode("héllo")
    assert ids.min() >= 3 and tokenizer.decode([*ids, data.EOS_ID, 50]) == "héllo"
    words = data.WordTokenizer(listops.VOCABULARY)
    assert words.decode(words.encode("[MAX 2 9 ]")) == "[MAX 2 9 ]"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        words.encode("[MAX 2 x ]")


def test_bad_names_and_sizes_are_rejected(data_dir):
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        tasks.get_task("nope")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        tasks.train_batches(tasks.get_task("sort"), data_dir=data_dir, batch_size=0, max_length=8, seed=0)
