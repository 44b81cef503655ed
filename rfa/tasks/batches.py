"""A task's training and evaluation batches: its kind's examples through the generic grain pipeline."""

from __future__ import annotations

import grain

from rfa.data.pipeline import batches, check_sizes
from rfa.tasks.base import Task, task_kind


def _batches(task: Task, split: str, *, data_dir, batch_size, max_length, train, seed, shard, max_batches, options):
    check_sizes(batch_size, max_length)
    kind = task_kind(task.kind)
    source = kind.source(task, split, data_dir=data_dir, max_length=max_length, **options)
    return batches(
        source,
        lambda dataset: kind.examples(task, dataset, max_length=max_length),
        train=train,
        batch_size=batch_size,
        seed=seed,
        shard=shard,
        rows_are_examples=kind.rows_are_examples,
        max_batches=max_batches,
    )


def train_batches(
    task: Task,
    *,
    data_dir: str,
    batch_size: int,
    max_length: int,
    seed: int,
    shard: tuple[int, int] = (0, 1),
    **options,
) -> grain.IterDataset:
    """Endless shuffled training batches of ``batch_size`` rows of length ``max_length``.

    Args:
      task: from ``rfa.tasks.get_task``.
      data_dir: where TFDS datasets live (the project's own are prepared there on first use).
      batch_size: B, rows of a global batch.
      max_length: L, the padded (or packed) length.
      seed: shuffling seed; the same seed gives the same batches.
      shard: ``(process_index, process_count)``: this process's block of ``B / count`` rows of each global batch
        (``rfa.data.pipeline.batches``: it reads only those examples where the kind's rows are its examples).
      **options: the task kind's own (``kind.data_options(config)``; forecasting: ``horizon``).

    Returns:
      A grain ``IterDataset``; ``iter()`` of it is a checkpointable ``DatasetIterator``.

    Example:
      >>> import tempfile
      >>> from rfa.tasks import get_task
      >>> data_dir = tempfile.mkdtemp()  # algorithmic/sort is generated there on first use
      >>> batches = iter(train_batches(get_task("sort"), data_dir=data_dir, batch_size=32, max_length=40, seed=0))
      >>> next(batches)["inputs"].shape
      (32, 40)
    """
    return _batches(
        task,
        task.train_split,
        data_dir=data_dir,
        batch_size=batch_size,
        max_length=max_length,
        train=True,
        seed=seed,
        shard=shard,
        max_batches=None,
        options=options,
    )


def eval_batches(
    task: Task,
    *,
    data_dir: str,
    batch_size: int,
    max_length: int,
    split: str | None = None,
    max_batches: int | None = None,
    shard: tuple[int, int] = (0, 1),
    **options,
) -> grain.IterDataset:
    """One pass over an evaluation split in file order, stopped after ``max_batches`` (None: all).

    Same arguments and batch layout as :func:`train_batches`; ``split`` is a TFDS split name (default: the task's
    ``validation_split``; its ``test_split`` is read once, at the end of training). The last batch is padded with
    empty rows (weight 0) so every batch has ``batch_size`` rows.
    """
    split = task.validation_split if split is None else split
    return _batches(
        task,
        split,
        data_dir=data_dir,
        batch_size=batch_size,
        max_length=max_length,
        train=False,
        seed=0,
        shard=shard,
        max_batches=max_batches,
        options=options,
    )
