"""grain input pipelines over ``tfds.data_source``: tokenize, filter or pack, pad, batch.

Training batches are an endless, reshuffled-per-epoch stream whose position is a small grain
iterator state (checkpointed beside the model, so a resumed run sees the same batches as an
uninterrupted one); evaluation batches are one pass in file order, the last batch padded with
empty rows. Every batch is a dict of NumPy arrays with static shapes:

- ``seq2seq``: ``inputs [B, L]`` source ids, ``targets [B, L]`` target ids ending in EOS
  (pairs longer than L are dropped).
- ``classification``: ``inputs [B, L]`` (truncated to L), ``label [B]``, ``weight [B]``
  (0 for padding rows).
- ``lm``: the split read as one stream of documents, each ended by EOS, cut into windows of
  L + 1: ``inputs = w[:-1]``, ``targets = w[1:]``.
- ``image_classification``: ``image [B, H, W, C]`` float32 in [0, 1] (pixels / ``task.pixel_max``),
  ``label [B]``, ``weight [B]``.
- ``forecast``: windows of the series normalised by the training split's mean and deviation,
  ``inputs [B, L, C]`` (the lookback), ``targets [B, horizon, C]``, ``weight [B]``
  (:mod:`rfa.data.series`: a split's targets lie in it, its lookbacks may reach into the past).

Id 0 is padding everywhere, so weights of token losses are ``targets != 0``.
"""

from __future__ import annotations

import grain
import jax
import numpy as np
import tensorflow_datasets as tfds
from jax.experimental import multihost_utils

from rfa.data.series import check_series, normalization, window_starts
from rfa.data.tasks import Task
from rfa.data.tokenizers import EOS_ID, PAD_ID


class DatasetMissingError(FileNotFoundError):
    """A dataset is not prepared in the data_dir: a real TFDS one, or one of the project's that takes minutes."""


def _is_prepared(builder: tfds.core.DatasetBuilder) -> bool:
    # Not builder.is_prepared(): that logs a warning for every dataset not prepared yet.
    return (builder.data_path / "dataset_info.json").exists()


def _builder(dataset: str, data_dir: str) -> tfds.core.DatasetBuilder:
    return tfds.builder(dataset, data_dir=data_dir, file_format="array_record")


def prepare(dataset: str, data_dir: str) -> bool:
    """Prepares one of the project's datasets (e.g. ``"pathfinder/32"``) in ``data_dir``; False if it already was.

    Example:
      >>> import tempfile
      >>> prepare("listops/lra_sample", tempfile.mkdtemp())
      True
    """
    builder = _builder(dataset, data_dir)
    if _is_prepared(builder):
        return False
    builder.download_and_prepare()
    return True


def load_source(task: Task, split: str, data_dir: str):
    """The random-access ``tfds.data_source`` of ``split``; the project's own datasets are prepared on first use.

    Preparing one prints a single line on stderr (see ``rfa.data.generated.PreparedLocally``);
    with several processes, process 0 prepares it while the others wait.

    Raises:
      DatasetMissingError: a real dataset that is not in ``data_dir`` as ``array_record``, or one of the
        project's that is not prepared on first use (Long Range Arena sizes), with the command that
        prepares it.
    """
    if task.generated:  # the project's own builders: an error here is a bug to see, not a missing dataset
        if not task.prepare_on_first_use and not _is_prepared(_builder(task.dataset, data_dir)):
            raise DatasetMissingError(
                f"dataset {task.dataset!r} is not prepared in data_dir {data_dir!r}; it takes minutes to generate, so "
                f"it is not prepared on first use. Prepare it once with `python -m experiments.prepare_data "
                f"--dataset {task.dataset} --data_dir {data_dir}` (its small sample task, '<task>_sample', needs "
                "no preparation)."
            )
        if jax.process_index() == 0:
            prepare(task.dataset, data_dir)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"prepared {task.dataset}")
        return tfds.data_source(
            task.dataset, split=split, data_dir=data_dir, download=False, builder_kwargs={"file_format": "array_record"}
        )
    try:  # not tfds.data_source, whose is_prepared() check would log a warning before the error below
        return _builder(task.dataset, data_dir).as_data_source(split=split)
    except (
        tfds.core.registered.DatasetNotFoundError,
        KeyError,
        AssertionError,
        FileNotFoundError,
        ValueError,
    ) as error:
        raise DatasetMissingError(
            f"dataset {task.dataset!r} (split {split!r}) is not prepared in data_dir {data_dir!r}. Prepare it once, "
            f"on a machine with network access, with `tfds build {task.dataset} --data_dir={data_dir} "
            f"--file_format=array_record` (TFDS's builder may need `pip install tensorflow` for that step). "
            f"Cause: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error


def _pad(ids: np.ndarray, length: int) -> np.ndarray:
    return np.pad(ids, (0, length - len(ids)), constant_values=PAD_ID)


def _tokenize(task: Task, max_length: int):
    if task.kind == "forecast":  # windows come out of _Windows as they are
        return lambda ex: ex
    if task.kind == "image_classification":
        scale, shape = np.float32(1.0 / task.pixel_max), task.image_shape  # [H, W] images gain their channel axis
        return lambda ex: {
            "image": ex[task.inputs].reshape(shape).astype(np.float32) * scale,
            "label": np.int32(ex[task.targets]),
        }
    encode = task.tokenizer.encode
    if task.kind == "seq2seq":
        return lambda ex: {
            "inputs": encode(ex[task.inputs]),
            "targets": np.append(encode(ex[task.targets]), np.int32(EOS_ID)),
        }
    if task.kind == "classification":
        return lambda ex: {"inputs": encode(ex[task.inputs])[:max_length], "label": np.int32(ex[task.targets])}
    return lambda ex: {"inputs": np.append(encode(ex[task.inputs]), np.int32(EOS_ID))}  # EOS marks document ends


class _Windows:
    """A split's forecasting windows, normalised by the training split's statistics: ``inputs [lookback, C]``,
    ``targets [horizon, C]``, ``weight`` 1 (random access, for grain)."""

    def __init__(self, task: Task, split: str, data_dir: str, lookback: int, horizon: int):
        example = load_source(task, split, data_dir)[0]
        mean, std = normalization(load_source(task, task.train_split, data_dir)[0][task.inputs])
        self.values = ((check_series(example[task.inputs]) - mean) / std).astype(np.float32)
        self.starts = window_starts(len(self.values), lookback, horizon, int(example["start"]))
        self.lookback, self.horizon = lookback, horizon

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> dict:
        window = self.values[self.starts[index] : self.starts[index] + self.lookback + self.horizon]
        return {"inputs": window[: self.lookback], "targets": window[self.lookback :], "weight": np.float32(1)}


def _split_source(task: Task, split: str, data_dir: str, max_length: int, horizon: int | None):
    """The examples of ``split``: the TFDS source, or for forecasting its windows (lookback ``max_length``)."""
    if task.kind != "forecast":
        return load_source(task, split, data_dir)
    if horizon is None:
        raise ValueError("a forecasting task needs the horizon: pass horizon= (config.model.horizon).")
    return _Windows(task, split, data_dir, max_length, horizon)


def _fits(max_length: int):
    return lambda ex: len(ex["inputs"]) <= max_length and len(ex["targets"]) <= max_length


def _padded(task: Task, max_length: int):
    if task.kind == "forecast":
        return lambda ex: ex
    if task.kind == "image_classification":
        return lambda ex: {**ex, "weight": np.float32(1)}
    if task.kind == "classification":
        return lambda ex: {"inputs": _pad(ex["inputs"], max_length), "label": ex["label"], "weight": np.float32(1)}
    if task.kind == "lm":
        return lambda ex: {"inputs": ex["inputs"][:-1], "targets": ex["inputs"][1:]}
    return lambda ex: {key: _pad(ex[key], max_length) for key in ("inputs", "targets")}


def _batches(
    task: Task, source, *, train: bool, batch_size: int, max_length: int, seed: int, shard: tuple[int, int]
) -> grain.IterDataset:
    index, count = shard
    dataset = grain.MapDataset.source(source)[index::count]
    if train:
        dataset = dataset.shuffle(seed=seed).repeat()
    dataset = dataset.map(_tokenize(task, max_length))
    if task.kind == "seq2seq":
        dataset = dataset.filter(_fits(max_length))
    stream = dataset.to_iter_dataset()
    if task.kind == "lm":
        stream = grain.experimental.ConcatThenSplitIterDataset(stream, length_struct={"inputs": max_length + 1})
    stream = stream.map(_padded(task, max_length)).batch(batch_size, drop_remainder=train)
    return stream if train else stream.map(lambda batch: _fill_batch(batch, batch_size))


def _fill_batch(batch: dict, batch_size: int) -> dict:
    """Pads a short last evaluation batch with empty rows (all padding, weight 0)."""
    missing = batch_size - len(next(iter(batch.values())))
    return {
        key: np.concatenate([value, np.zeros((missing, *value.shape[1:]), value.dtype)]) for key, value in batch.items()
    }


def train_batches(
    task: Task,
    *,
    data_dir: str,
    batch_size: int,
    max_length: int,
    seed: int,
    shard: tuple[int, int] = (0, 1),
    horizon: int | None = None,
) -> grain.IterDataset:
    """Endless shuffled training batches of ``batch_size`` rows of length ``max_length``.

    Args:
      task: from ``rfa.data.get_task``.
      data_dir: where TFDS datasets live (the project's own are prepared there on first use).
      batch_size: rows per batch of this process.
      max_length: L, the padded (or packed) length.
      seed: shuffling seed; the same seed gives the same batches.
      shard: ``(process_index, process_count)``: this process reads every count-th example.
      horizon: forecasting tasks: the steps to forecast after each lookback window of ``max_length`` steps.

    Returns:
      A grain ``IterDataset``; ``iter()`` of it is a checkpointable ``DatasetIterator``.

    Example:
      >>> import tempfile
      >>> from rfa.data import get_task
      >>> data_dir = tempfile.mkdtemp()  # algorithmic/sort is generated there on first use
      >>> batches = iter(train_batches(get_task("sort"), data_dir=data_dir, batch_size=32, max_length=40, seed=0))
      >>> next(batches)["inputs"].shape
      (32, 40)
    """
    _check_sizes(batch_size, max_length)
    source = _split_source(task, task.train_split, data_dir, max_length, horizon)
    return _batches(task, source, train=True, batch_size=batch_size, max_length=max_length, seed=seed, shard=shard)


def eval_batches(
    task: Task,
    *,
    data_dir: str,
    batch_size: int,
    max_length: int,
    max_batches: int | None = None,
    shard: tuple[int, int] = (0, 1),
    horizon: int | None = None,
) -> grain.IterDataset:
    """One pass over the evaluation split in file order, stopped after ``max_batches`` (None: all).

    Same arguments and batch layout as :func:`train_batches`; the last batch is padded with
    empty rows so every batch has ``batch_size`` rows.
    """
    _check_sizes(batch_size, max_length)
    source = _split_source(task, task.eval_split, data_dir, max_length, horizon)
    batches = _batches(task, source, train=False, batch_size=batch_size, max_length=max_length, seed=0, shard=shard)
    return batches if max_batches is None else grain.experimental.LimitIterDataset(batches, count=max_batches)


def _check_sizes(batch_size: int, max_length: int) -> None:
    for name, value in (("batch_size", batch_size), ("max_length", max_length)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
