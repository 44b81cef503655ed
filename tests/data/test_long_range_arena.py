"""Long Range Arena data: the Pathfinder generator, ListOps at LRA lengths, preparation, and the quick runs."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rfa.data as data
import rfa.tasks as tasks
from rfa.configs.tasks import listops_lra, pathfinder
from rfa.data import listops
from rfa.data import pathfinder as pathfinder_data
from rfa.workdir import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = {config.name: config for config in pathfinder_data.Pathfinder.BUILDER_CONFIGS}  # 32, 32_sample, cpu
SIZES = pytest.mark.parametrize("name", ["32", "cpu"])


@SIZES
def test_pathfinder_curves_are_dashes_with_gaps_inside_the_image(name):
    config = CONFIGS[name]
    pixels, ends, fits = pathfinder_data.curves(np.random.default_rng(0), config, 64)
    assert fits.mean() > 0.5
    assert pixels[fits].min() >= 0 and pixels[fits].max() < config.resolution
    points_per_dash = pixels.shape[1] // config.dashes
    for curve_pixels, curve_ends in zip(pixels[fits], ends[fits], strict=True):
        dashes = curve_pixels.reshape(config.dashes, points_per_dash, 2)
        # consecutive dashes start dash + gap apart: their first pixels are at most that far (plus a pixel)
        steps = np.linalg.norm(np.diff(dashes[:, 0].astype(float), axis=0), axis=-1)
        assert np.all(steps <= config.dash_length + config.gap + np.sqrt(2))
        for end, near in ((curve_ends[0], dashes[0, 0]), (curve_ends[1], dashes[-1, -1])):
            assert np.all(np.floor(end) == near)  # the ends are where the curve's first and last pixels are


@SIZES
def test_pathfinder_images_hide_the_label_from_counts_and_distances(name):
    config, rng = CONFIGS[name], np.random.default_rng(1)
    images = {label: [pathfinder_data.image(rng, config, label) for _ in range(150)] for label in (False, True)}
    size = (config.resolution, config.resolution)
    for batch in images.values():
        assert all(im.shape == size and im.dtype == np.uint8 and set(np.unique(im)) == {0, 255} for im in batch)
    ink = {label: np.mean([np.count_nonzero(im) for im in batch]) for label, batch in images.items()}
    assert abs(ink[True] - ink[False]) < 0.05 * ink[False], ink  # same curves and dots either way
    distances = {
        label: [np.linalg.norm(np.subtract(*pathfinder_data.layout(rng, config, label)[1])) for _ in range(150)]
        for label in (False, True)
    }
    values, labels = np.concatenate([distances[False], distances[True]]), np.repeat([False, True], 150)
    best = max(max(np.mean((values >= t) == labels), np.mean((values < t) == labels)) for t in values)
    assert best < 0.62, best  # no threshold on the dots' distance reads the label (version 1.0.0: 0.83-0.85)


@pytest.mark.slow
def test_pathfinder_sample_has_both_labels_and_distinct_splits(data_dir):
    task = tasks.get_task("pathfinder32_sample")
    train = data.load_source(task, "train", data_dir)
    validation = data.load_source(task, "validation", data_dir)
    assert (len(train), len(validation)) == (2048, 256)
    labels = np.array([train[i]["label"] for i in range(400)])
    assert 0.4 < labels.mean() < 0.6
    image = train[0]["image"]
    assert image.shape == (32, 32) and image.dtype == np.uint8
    assert not np.array_equal(image, validation[0]["image"])
    ids = task.tokenizer.encode(image)
    assert ids.shape == (1024,) and ids.min() >= data.tokenizers.NUM_SPECIAL and task.vocab_size == 259
    np.testing.assert_array_equal(task.tokenizer.decode(ids), image.reshape(-1))


def test_pixel_tokenizer_refuses_what_is_not_a_uint8_image():
    with pytest.raises(TypeError, match="PixelTokenizer encodes uint8 images, got dtype float32"):
        data.PixelTokenizer().encode(np.zeros((2, 2), np.float32))


@pytest.mark.slow
def test_listops_lra_sample_has_lra_lengths_and_true_labels(data_dir):
    task = tasks.get_task("listops_lra_sample")
    source = data.load_source(task, "train", data_dir)
    assert len(source) == 2048
    lengths = []
    for i in range(60):
        text = source[i]["source"].decode()
        lengths.append(len(text.split()))
        assert listops.evaluate(text) == source[i]["label"]
    assert min(lengths) >= 500 and max(lengths) <= 2000 and max(lengths) > 1500


def test_lra_tasks_at_full_size_say_how_to_prepare_them(tmp_path):
    for name, dataset in (("listops_lra", "listops/lra"), ("pathfinder32", "pathfinder/32")):
        with pytest.raises(data.DatasetMissingError) as error:
            data.load_source(tasks.get_task(name), "train", str(tmp_path))
        message = str(error.value)
        assert f"dataset '{dataset}' is not prepared in data_dir '{tmp_path}'" in message
        assert f"rfa prepare-data --dataset {dataset} --data_dir {tmp_path}" in message
    assert not os.listdir(tmp_path)  # nothing was generated


@pytest.mark.slow
def test_prepare_data_command_prepares_once(tmp_path):
    command = [
        sys.executable,
        "-m",
        "rfa.experiments.prepare_data",
        "--dataset",
        "pathfinder/32_sample",
        f"--data_dir={tmp_path}",
    ]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    assert first.stdout.startswith("pathfinder/32_sample: prepared in ")
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    assert again.stdout.strip() == f"pathfinder/32_sample: already prepared ({tmp_path})"


def test_a_dataset_prepared_by_another_process_meanwhile_is_used(tmp_path, monkeypatch):
    """Two runs started side by side prepare the same dataset: TFDS's final rename fails in the later one
    (``FileExistsError``), which then reads the earlier one's copy. Any other failure still raises."""
    real = pathfinder_data.Pathfinder.download_and_prepare

    def raced(builder, **kwargs):
        real(builder, **kwargs)  # as if another process had finished first
        raise FileExistsError("Destination ... already exists.")

    monkeypatch.setattr(pathfinder_data.Pathfinder, "download_and_prepare", raced)
    assert data.prepare("pathfinder/32_sample", str(tmp_path)) is False
    assert len(data.load_source(tasks.get_task("pathfinder32_sample"), "validation", str(tmp_path))) > 0

    def fails(builder, **kwargs):
        raise FileExistsError("Destination ... already exists.")

    monkeypatch.setattr(pathfinder_data.Pathfinder, "download_and_prepare", fails)
    with pytest.raises(FileExistsError):  # nothing prepared there: the error is real
        data.prepare("pathfinder/32_sample", str(tmp_path / "elsewhere"))


def test_lra_configs_mirror_the_published_setup_and_scale_down_by_name():
    full = listops_lra.get_config("positive")
    assert (full.max_length, full.batch_size, full.num_train_steps) == (2000, 32, 5000)
    assert (full.model.num_encoder_layers, full.model.d_model, full.model.num_heads, full.model.mlp_dim) == (
        4,
        512,
        8,
        1024,
    )
    cpu, quick = listops_lra.get_config("positive,cpu"), listops_lra.get_config("exact,quick")
    assert cpu.max_length == quick.max_length == 2000 and cpu.task == "listops_lra"
    assert quick.task == "listops_lra_sample" and quick.num_train_steps < cpu.num_train_steps
    path = pathfinder.get_config("exact")
    assert (path.max_length, path.batch_size, path.num_train_steps) == (1024, 512, 62_400)
    assert (path.model.num_encoder_layers, path.model.d_model, path.model.num_heads) == (1, 32, 2)
    assert pathfinder.get_config("exact,quick").task == "pathfinder32_sample"
    with pytest.raises(ConfigError, match=r"<scale> one of \['cpu', 'quick'\], got 'exact,huge'"):
        pathfinder.get_config("exact,huge")


@pytest.mark.slow
def test_lra_quick_comparison_trains_at_the_real_lengths(data_dir, tmp_path):
    output = tmp_path / "lra.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rfa.experiments.studies.compare_kernels",
            "--config",
            "compare_kernels:lra_quick",
            "--workdir",
            str(tmp_path),
            f"--config.data_dir={data_dir}",
            f"--output={output}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(output.read_text())
    assert [(r["task"], r["attention"]) for r in results] == [
        ("listops_lra_sample", "exact"),
        ("listops_lra_sample", "positive"),
        ("pathfinder32_sample", "exact"),
        ("pathfinder32_sample", "positive"),
    ]
    assert all(r["steps"] == 4 and 0.0 <= r["test"]["accuracy"]["mean"] <= 1.0 for r in results)
    config = json.loads((tmp_path / "listops_lra" / "positive" / "seed_0" / "config.json").read_text())
    assert config["max_length"] == 2000  # LRA's length, on the sample's expressions
