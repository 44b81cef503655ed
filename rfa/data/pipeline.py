"""grain input pipelines over ``tfds.data_source``: shard, shuffle, read as the task kind says, batch.

Training batches are an endless, reshuffled-per-epoch stream whose position is a small grain
iterator state (checkpointed beside the model, so a resumed run sees the same batches as an
uninterrupted one); evaluation batches are one pass in file order, the last batch padded with
empty rows. What an example becomes (tokenized, filtered, packed, padded) is its task kind's
(``rfa.tasks``); :func:`batches` does the rest, the same for every kind. Id 0 is padding everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import grain
import jax
import numpy as np
import tensorflow_datasets as tfds
from absl import logging as absl_logging
from jax.experimental import multihost_utils

from rfa.data.tokenizers import PAD_ID


class DatasetMissingError(FileNotFoundError):
    """A dataset is not prepared in the data_dir: a real TFDS one, or one of the project's that takes minutes."""


def _is_prepared(builder: tfds.core.DatasetBuilder) -> bool:
    # Not builder.is_prepared(): that logs a warning for every dataset not prepared yet.
    return (builder.data_path / "dataset_info.json").exists()


def _builder(dataset: str, data_dir: str, config: tfds.core.BuilderConfig | None = None) -> tfds.core.DatasetBuilder:
    if config is None:
        return tfds.builder(dataset, data_dir=data_dir, file_format="array_record")
    previous = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)  # TFDS warns of every config its class does not list
    try:
        return tfds.builder(dataset, data_dir=data_dir, file_format="array_record", config=config)
    finally:
        absl_logging.set_verbosity(previous)


def prepare(dataset: str, data_dir: str, config: tfds.core.BuilderConfig | None = None) -> bool:
    """Prepares one of the project's datasets (e.g. ``"pathfinder/32"``) in ``data_dir``; False if it already was.

    ``config``: a builder config made by the caller (a dataset whose sizes a training config sets, e.g.
    ``rfa.data.mqar.MqarConfig``), prepared in its own directory under its name. Two processes that prepare the
    same dataset at once (two runs started side by side) both generate it; TFDS's final rename then fails in the
    later one, which uses the earlier one's copy (the same examples: generation is seeded by the config).

    Example:
      >>> import tempfile
      >>> prepare("algorithmic/sort", tempfile.mkdtemp())
      True
    """
    builder = _builder(dataset, data_dir, config)
    if _is_prepared(builder):
        return False
    try:
        builder.download_and_prepare()
    except FileExistsError:  # another process renamed its copy into place first
        if not _is_prepared(builder):
            raise
        return False
    return True


def load_source(task, split: str, data_dir: str, config: tfds.core.BuilderConfig | None = None):
    """The random-access ``tfds.data_source`` of a task's ``split``; the project's own datasets are prepared on
    first use. ``task`` is a ``rfa.tasks.Task`` (its ``dataset``, ``generated`` and ``prepare_on_first_use``);
    ``config`` a builder config of one of the project's datasets made by the caller (see :func:`prepare`).

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
                f"it is not prepared on first use. Prepare it once with `rfa prepare-data "
                f"--dataset {task.dataset} --data_dir {data_dir}` (its small sample task, '<task>_sample', needs "
                "no preparation)."
            )
        if jax.process_index() == 0:
            prepare(task.dataset, data_dir, config)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"prepared {task.dataset}")
        return _builder(task.dataset, data_dir, config).as_data_source(split=split)
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


def pad(ids: np.ndarray, length: int) -> np.ndarray:
    """``ids`` followed by padding (id 0) up to ``length``."""
    return np.pad(ids, (0, length - len(ids)), constant_values=PAD_ID)


READ_OPTIONS = grain.ReadOptions(num_threads=2, prefetch_buffer_size=32)


def stream(dataset: grain.MapDataset) -> grain.IterDataset:
    """``dataset.to_iter_dataset()`` reading 32 examples ahead on 2 threads (:data:`READ_OPTIONS`).

    grain's defaults read 500 examples ahead on 16 threads: a short evaluation of two batches of 8 read 500, the
    threads' Python work (tokenizing, padding) took the GIL from the training loop on a small machine, and every
    ``next`` scanned the 500 futures of its buffer (about a fifth of a quick training run's time, profiled). A
    task kind's ``examples`` ends its map-style part with it.

    Example:
      >>> next(iter(stream(grain.MapDataset.range(3).map(lambda x: x * 2))))
      0
    """
    return dataset.to_iter_dataset(READ_OPTIONS)


def batches(
    source,
    examples,
    *,
    train: bool,
    batch_size: int,
    seed: int = 0,
    shard: tuple[int, int] = (0, 1),
    rows_are_examples: bool = True,
    max_batches: int | None = None,
) -> grain.IterDataset:
    """This process's rows of global batches of ``batch_size`` rows from a random-access ``source``.

    Global batch ``j`` holds the examples at positions ``[j B, (j + 1) B)`` of the stream (shuffled for training);
    process ``index`` of ``count`` takes its contiguous block of ``B / count`` rows of each. When every example
    is one row (``rows_are_examples``), the process reads only the examples of its rows: input work per process
    falls as ``1 / count``. When rows are made from the examples themselves (filtered by their length, packed),
    which examples make up a batch is known only after reading them: every process reads the whole global batch
    and keeps its block. Either way the global batches, and so a run's metrics, do not depend on ``count``.

    Args:
      source: random-access examples (a ``tfds.data_source`` or any sequence).
      examples: ``grain.MapDataset -> grain.IterDataset``, what each example becomes (the task kind's
        ``examples``): fixed-shape dicts of arrays.
      train: an endless stream reshuffled every epoch (dropping the last partial batch), else one pass in
        order with the last batch filled with empty rows (all padding, weight 0).
      batch_size: B, rows of a global batch (divisible by ``count``).
      seed: the shuffling seed.
      shard: ``(index, count)``: this process and the number of processes.
      rows_are_examples: each example becomes exactly one row, in order (the task kind's ``rows_are_examples``).
      max_batches: evaluation: stop after this many batches (None: all).

    Returns:
      batches of ``B / count`` rows; :func:`examples_read` counts the examples this process read into them.

    Example:
      >>> rows = lambda dataset: stream(dataset.map(lambda x: {"x": x}))
      >>> [next(iter(batches(range(8), rows, train=False, batch_size=4, shard=(p, 2))))["x"] for p in (0, 1)]
      [array([0, 1]), array([2, 3])]
    """
    check_sizes(batch_size)
    index, count = shard
    if batch_size % count or not 0 <= index < count:
        raise ValueError(
            f"shard {shard} must be (index, count) with 0 <= index < count and count dividing the "
            f"batch_size {batch_size}."
        )
    rows = batch_size // count
    dataset = grain.MapDataset.source(source)
    if train:
        dataset = dataset.shuffle(seed=seed).repeat()
    if not rows_are_examples:
        read = _counted(examples(dataset)).batch(batch_size, drop_remainder=train)
        if not train:
            read = read.map(lambda batch: _fill_batch(batch, len(next(iter(batch.values()))), batch_size))
            if max_batches is not None:
                read = grain.experimental.LimitIterDataset(read, count=max_batches)
        return read.map(lambda batch: {key: value[index * rows : (index + 1) * rows] for key, value in batch.items()})
    if max_batches is not None and not train:
        dataset = dataset[: max_batches * batch_size]
    own = _ProcessRows(dataset, batch_size, shard, whole_batches=train)
    read = _counted(examples(grain.MapDataset.source(own))).batch(rows, drop_remainder=train)
    return read if train else read.map_with_index(lambda j, batch: _fill_batch(batch, own.real_rows(j), rows))


class _ProcessRows(Sequence):
    """The examples of process ``index``'s rows of every global batch of ``dataset``, in order.

    Row ``i`` is the example at position ``(i // b) B + index b + i % b`` (``b = B / count``). With
    ``whole_batches=False`` a last partial global batch is kept: its rows past the end repeat example 0, and
    :meth:`real_rows` says how many of batch ``j``'s rows are real (the others are emptied after batching, so
    that every process yields the same number of batches)."""

    def __init__(self, dataset: grain.MapDataset, batch_size: int, shard: tuple[int, int], *, whole_batches: bool):
        self.dataset, self.batch_size = dataset, batch_size
        self.rows = batch_size // shard[1]
        self.offset = shard[0] * self.rows
        size = len(dataset)
        self.batches = size // batch_size if whole_batches else -(-size // batch_size)

    def __len__(self) -> int:
        return self.batches * self.rows

    def __getitem__(self, i: int):
        position = (i // self.rows) * self.batch_size + self.offset + i % self.rows
        return self.dataset[position if position < len(self.dataset) else 0]

    def real_rows(self, j: int) -> int:
        return int(np.clip(len(self.dataset) - j * self.batch_size - self.offset, 0, self.rows))


_read = [0]


def _counted(stream: grain.IterDataset) -> grain.IterDataset:
    def count(example):
        _read[0] += 1
        return example

    return stream.map(count)


def examples_read() -> int:
    """How many examples this process has read into batches so far (every pipeline of :func:`batches`): the
    input work of a process, which falls as ``1 / count`` with the process count where rows are examples.

    Example:
      >>> before = examples_read()
      >>> _ = next(iter(batches(range(8), stream, train=True, batch_size=4, shard=(1, 2))))
      >>> examples_read() - before
      2
    """
    return _read[0]


def global_position(state: dict, shard: tuple[int, int], *, rows_are_examples: bool) -> dict:
    """A training iterator's ``get_state()`` as a position in the global stream of batches, the same for every
    process count: where a process reads only its rows, its iterator counts ``B / count`` examples per batch.

    Example:
      >>> global_position({"next_index": 12}, (1, 4), rows_are_examples=True)  # 3 batches of 16 rows
      {'next_index': 48}
    """
    if not rows_are_examples:  # every process reads the whole global stream
        return state
    return {**state, "next_index": state["next_index"] * shard[1]}


def local_position(position: dict, shard: tuple[int, int], *, rows_are_examples: bool) -> dict:
    """The iterator state of process ``shard`` at a :func:`global_position` written by any process count.

    Raises:
      ValueError: the position does not fall on a whole block of this process's rows (the batch size is not
        divisible by the process count), which would repeat or skip examples.

    Example:
      >>> local_position({"next_index": 48}, (0, 2), rows_are_examples=True)
      {'next_index': 24}
    """
    if not rows_are_examples:
        return position
    count = shard[1]
    if position["next_index"] % count:
        raise ValueError(
            f"the data position ({position['next_index']} examples read) does not split over {count} processes: "
            f"resume with a process count that divides the global batch."
        )
    return {**position, "next_index": position["next_index"] // count}


def _fill_batch(batch: dict, real: int, size: int) -> dict:
    """The first ``real`` rows of ``batch``, then empty rows (all padding, weight 0) up to ``size``."""
    return {
        key: np.concatenate([value[:real], np.zeros((size - real, *value.shape[1:]), value.dtype)])
        for key, value in batch.items()
    }


def check_sizes(batch_size: int, max_length: int = 1) -> None:
    """Raises a ValueError unless both are positive integers."""
    for name, value in (("batch_size", batch_size), ("max_length", max_length)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
