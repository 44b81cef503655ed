from __future__ import annotations

import time

import numpy as np
from absl import flags

from rfa.data import examples_read
from rfa.experiments.benchmarks.input_work import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.input_work.report import table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import output_path, write_json
from rfa.experiments.common.timing import environment
from rfa.tasks import get_task, train_batches

_TASKS = flags.DEFINE_list("tasks", ["listops", "sort"], "Tasks (rfa.tasks) whose training input is measured.")
_PROCESSES = flags.DEFINE_list("processes", ["1", "2", "4"], "Process counts P.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "The global batch B (divisible by every P).")
_MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "The rows' length.")
_STEPS = flags.DEFINE_integer("steps", 50, "Batches timed per process, after one untimed.")
_DATA_DIR = flags.DEFINE_string("data_dir", "data", "TFDS data_dir (the project's datasets are generated there).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_input_work.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON goes.")


def _process_input(task_name: str, shard: tuple[int, int], *, batch_size: int, max_length: int, steps: int, data_dir):
    """``(examples read per step, median seconds per batch)`` of process ``shard``'s training pipeline."""
    batches = iter(
        train_batches(
            get_task(task_name),
            data_dir=data_dir,
            batch_size=batch_size,
            max_length=max_length,
            seed=0,
            shard=shard,
        )
    )
    next(batches)  # starts the pipeline's threads
    seconds, before = [], examples_read()
    for _ in range(steps):
        began = time.perf_counter()
        next(batches)
        seconds.append(time.perf_counter() - began)
    batches.close()
    return (examples_read() - before) / steps, float(np.median(seconds))


def main(argv):
    del argv
    measured = []
    for task in _TASKS.value:
        for count in map(int, _PROCESSES.value):
            for index in range(count):
                read, seconds = _process_input(
                    task,
                    (index, count),
                    batch_size=_BATCH_SIZE.value,
                    max_length=_MAX_LENGTH.value,
                    steps=_STEPS.value,
                    data_dir=_DATA_DIR.value,
                )
                measured.append(
                    {"task": task, "processes": count, "process": index, "examples_per_step": read, "seconds": seconds}
                )
    data = {
        "setting": f"global batch {_BATCH_SIZE.value}, length {_MAX_LENGTH.value}, {_STEPS.value} batches per process",
        "environment": environment(),
        "processes": measured,
    }
    print(table(data))
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_input_work.json")
    write_json(output, data)
    print(f"\nwrote {output}")


if __name__ == "__main__":
    run_main(main)
