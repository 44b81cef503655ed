"""scikit-learn's handwritten digits as a TFDS dataset: stratified deterministic splits, the pipeline's images."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

import rfa.data as data
import rfa.tasks as tasks
from rfa.data.digits import split_indices


def test_split_indices_cut_every_class_70_15_15_without_overlap():
    labels = np.repeat(np.arange(10), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])
    parts = split_indices(labels)
    assert sorted(np.concatenate(list(parts.values()))) == list(range(len(labels)))  # a partition
    for label in range(10):
        counts = [int(np.sum(labels[parts[name]] == label)) for name in ("train", "validation", "test")]
        total = int(np.sum(labels == label))
        assert abs(counts[0] - 0.7 * total) <= 1 and abs(counts[1] - 0.15 * total) <= 1, counts
    np.testing.assert_array_equal(split_indices(labels)["test"], parts["test"])  # deterministic


@pytest.mark.slow
def test_digits_dataset_holds_sklearns_images_and_the_pipeline_scales_them(data_dir):
    task = tasks.get_task("digits")
    reference = load_digits()
    sizes = {}
    for split in ("train", "validation", "test"):
        source = data.load_source(task, split, data_dir)
        sizes[split] = len(source)
        rows = np.array([source[i]["index"] for i in range(len(source))])
        np.testing.assert_array_equal(np.sort(rows), split_indices(reference.target)[split])
        for i in (0, len(source) - 1):
            np.testing.assert_array_equal(source[i]["image"][..., 0], reference.images[rows[i]])
            assert source[i]["label"] == reference.target[rows[i]]
    assert sizes == {"train": 1258, "validation": 270, "test": 269}
    batch = next(iter(tasks.eval_batches(task, data_dir=data_dir, batch_size=32, max_length=1)))
    assert set(batch) == {"image", "label", "weight"} and batch["image"].shape == (32, 8, 8, 1)
    assert batch["image"].dtype == np.float32 and batch["image"].max() == 1.0 and batch["image"].min() == 0.0
