"""Experiments and benchmarks built on the rfa package; ``run_main`` starts each command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from absl import app, flags, logging

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


def exit_interrupted(stop) -> NoReturn:
    """Ends a training command stopped by ``rfa.train.TrainingInterrupted``: one line, status 128 + signal.

    Args:
      stop: the ``TrainingInterrupted`` raised by ``train_and_evaluate``.

    Example:
      >>> import signal
      >>> from rfa.train import TrainingInterrupted
      >>> exit_interrupted(TrainingInterrupted(6, signal.SIGINT, "/tmp/sort/checkpoints/6"))  # and one line on stderr
      Traceback (most recent call last):
      SystemExit: 130
    """
    print(f"{stop}; run the same command to resume", file=sys.stderr)
    sys.exit(stop.exit_status)
