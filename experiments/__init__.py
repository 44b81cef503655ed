"""Experiments and benchmarks built on the rfa package; ``run_main`` starts each command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from absl import app, flags, logging

from rfa.data import DatasetMissingError
from rfa.train import CheckpointError, TrainingInterrupted
from rfa.workdir import ConfigError

T = TypeVar("T")

INTERRUPTED_STATUS = 130  # 128 + SIGINT, what shells expect of a program stopped by Ctrl-C


def run_main(main: Callable[[list[str]], object]) -> None:
    """``absl.app.run(main)`` with library logs from WARNING up and Ctrl-C ending in one line.

    absl raises Python's root logger to INFO once the flags are parsed, so every library's INFO
    records would reach the terminal: JAX's probe of backends this machine does not have
    ("Unable to initialize backend 'tpu'") in the middle of a progress bar, orbax and TFDS naming
    every file they touch. The level stays WARNING unless ``--verbosity`` is given
    (``--verbosity=0`` shows them). A ``KeyboardInterrupt`` ends the program with status 130 and
    one line instead of a traceback: what a command finished is on disk, and running it again
    resumes from there.

    Args:
      main: the command's ``main(argv)``.

    Example:
      >>> if __name__ == "__main__":
      ...     run_main(main)
    """

    def quiet_main(argv):
        if not flags.FLAGS["verbosity"].present:
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except KeyboardInterrupt:
            print("interrupted; run the same command to resume from what is saved", file=sys.stderr)
            sys.exit(INTERRUPTED_STATUS)

    app.run(quiet_main)


def run_training(work: Callable[..., T], *args, **kwargs) -> T:
    """Runs a training command's work: an error of its config, data or checkpoints ends the command with
    its one-line message (status 1), a stop by SIGINT or SIGTERM (``rfa.train.TrainingInterrupted``,
    the last step's checkpoint saved) with one line and status 128 + signal.

    Args:
      work: e.g. ``rfa.train.train_and_evaluate``; ``args`` and ``kwargs`` are passed to it.

    Example:
      >>> import signal
      >>> from rfa.train import TrainingInterrupted
      >>> def stopped():
      ...     raise TrainingInterrupted(6, signal.SIGINT, "/tmp/sort/checkpoints/6")
      >>> run_training(stopped)  # and one line on stderr
      Traceback (most recent call last):
      SystemExit: 130
    """
    try:
        return work(*args, **kwargs)
    except (ConfigError, DatasetMissingError, CheckpointError) as error:
        sys.exit(f"error: {error}")
    except TrainingInterrupted as stop:
        print(f"{stop}; run the same command to resume", file=sys.stderr)
        sys.exit(stop.exit_status)
