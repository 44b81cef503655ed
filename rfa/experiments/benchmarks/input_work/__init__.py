"""The input work of each process of a multi-process run: examples read and prepared per step, for P processes.

Run: ``rfa benchmark input_work``. For each process count P of ``--processes`` and each task of ``--tasks``, the
training pipelines of the P processes (``rfa.tasks.train_batches`` with ``shard=(p, P)``, what ``rfa train``
builds in process p) are built in turns in this one process, and each gives ``--steps`` batches of its rows of the
global batch ``--batch_size``. Per process it records the examples read into its batches per step (an exact count,
``rfa.data.examples_read``) and the median seconds its pipeline took per batch. Where a task's rows are its
examples (ListOps) the count falls as ``B / P``; where which examples make a batch is known only once they are
read (sort drops pairs longer than the model's length) every process reads the whole global batch, ``B``. The
pipelines are those of separate processes, but run here one after another on one host: the counts are those of a
real launch (``tests/train/test_multiprocess.py`` checks them in one), the seconds are one core's.
"""
