"""Prepare the project's datasets that are not prepared on first use (Long Range Arena at its real sizes).

  rfa prepare-data --dataset listops/lra --dataset pathfinder/32 --data_dir data

Each dataset is generated on this machine (nothing is downloaded) into ``--data_dir`` as
``array_record``; one already prepared there is left as it is. Prints the time each one took.
"""

from __future__ import annotations

import time

from absl import flags

from rfa.data import prepare
from rfa.experiments.common.cli import run_main

_DATASETS = flags.DEFINE_multi_string(
    "dataset", ["listops/lra", "pathfinder/32"], "TFDS names of the project's datasets (e.g. pathfinder/32)."
)
_DATA_DIR = flags.DEFINE_string("data_dir", "data", "TFDS data_dir.")


def main(argv):
    del argv
    for dataset in _DATASETS.value:
        start = time.perf_counter()
        done = prepare(dataset, _DATA_DIR.value)
        took = f"prepared in {time.perf_counter() - start:.0f} s" if done else "already prepared"
        print(f"{dataset}: {took} ({_DATA_DIR.value})", flush=True)


if __name__ == "__main__":
    run_main(main)
