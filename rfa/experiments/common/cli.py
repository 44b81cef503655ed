"""What every command line of the experiments shares: starting, the shipped configs, the user's modules, errors.

Commands run from any directory once rfa is installed: ``--config sort:positive`` names a shipped
config (``rfa.configs``, installed with rfa) when no such file exists where you stand, and a module
named in ``config.modules`` is imported from the current directory (no ``PYTHONPATH`` needed;
:func:`rfa.workdir.import_modules`).
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from absl import app, flags, logging

from rfa import configs
from rfa.workdir import ConfigError

T = TypeVar("T")

HELP_FLAGS = frozenset({"--help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml"})  # absl's help flags
INTERRUPTED_STATUS = 130  # 128 + SIGINT, what shells expect of a program stopped by Ctrl-C
SHIPPED_CONFIGS = os.path.dirname(configs.__file__)


def one_line_errors() -> tuple[type[Exception], ...]:
    """The errors a command ends with in one line: of a config, data, checkpoint or distributed set-up. Imported
    when asked for, not with this module: rfa.data and rfa.train (grain, TFDS, orbax: about a second) are no part
    of a sweep's or a benchmark's start-up."""
    from rfa.data import DatasetMissingError
    from rfa.train import CheckpointError, DistributedError

    return ConfigError, DatasetMissingError, CheckpointError, DistributedError


def shipped_config(name: str) -> str | None:
    """The path of the config shipped with rfa under ``name`` (``"sort"``; ``"sort.py"`` and the 0.2 form
    ``"configs/sort.py"`` too), whichever of ``rfa/configs/{tasks,sweeps,studies}`` holds it; None if none does.

    Example:
      >>> os.path.relpath(shipped_config("performer_fig2"), SHIPPED_CONFIGS)
      'sweeps/performer_fig2.py'
    """
    stem = name.removeprefix("configs/").removeprefix("configs" + os.sep).removesuffix(".py")
    module = configs.find(configs.RENAMED.get(stem, stem))
    return None if module is None else importlib.util.find_spec(module).origin


def shipped_config_names() -> dict[str, list[str]]:
    """The names of the shipped configs, by group: ``{"tasks": ["co2", ...], "sweeps": [...], "studies": [...]}``."""
    return {
        group: sorted(
            f.removesuffix(".py")
            for f in os.listdir(os.path.join(SHIPPED_CONFIGS, group))
            if f != "__init__.py" and f.endswith(".py")
        )
        for group in configs.GROUPS
    }


def resolve_config(value: str) -> str:
    """A ``--config`` value ``PATH[:ARG]`` with PATH made a shipped config's path where no file PATH exists and
    PATH names one (``sort``, ``sort.py`` or ``configs/sort.py``); anything else is returned as it is.

    Example:
      >>> resolve_config("sort:positive,quick") == shipped_config("sort") + ":positive,quick"  # no ./sort
      True
    """
    path, colon, arg = value.partition(":")
    if os.path.isfile(path):  # a folder named like a config (say, a workdir ./sort) hides nothing
        return value
    shipped = shipped_config(path)
    return value if shipped is None else shipped + colon + arg


def resolve_config_arguments(argv: list[str]) -> list[str]:
    """``argv`` with the value of every ``--config`` flag (``--config=V`` or ``--config V``) resolved."""
    resolved, previous = [], None
    for arg in argv:
        if previous == "--config":
            arg = resolve_config(arg)
        elif arg.startswith("--config="):
            arg = "--config=" + resolve_config(arg.removeprefix("--config="))
        resolved.append(arg)
        previous = arg
    return resolved


def run_main(main: Callable[[list[str]], object]) -> None:
    """``absl.app.run(main)`` with shipped configs found from any directory, library logs from WARNING up, and
    an error of a config, data or checkpoint, or Ctrl-C, ending in one line; ``--help`` ends with status 0.

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

    started = []

    def quiet_main(argv):
        started.append(True)
        # What is imported by now lives as long as the command's process: the collector need not walk it again
        # (half a second of a short training run's full collections), nor free every compiled program one by one at
        # exit (about a second; the memory goes back to the system with the process, and files, metrics and
        # checkpoints are closed before).
        gc.freeze()
        atexit.register(gc.freeze)
        if not flags.FLAGS["verbosity"].present:
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except KeyboardInterrupt:
            print("interrupted; run the same command to resume from what is saved", file=sys.stderr)
            sys.exit(INTERRUPTED_STATUS)
        except Exception as error:
            if isinstance(error, one_line_errors()):
                sys.exit(f"error: {error}")
            raise

    argv = resolve_config_arguments(sys.argv)
    try:
        app.run(quiet_main, argv=argv)
    except (KeyError, AttributeError, TypeError, ValueError) as error:
        if started:  # raised by the command itself: a bug, with its traceback
            raise
        sys.exit(f"error: {override_error(argv, error)}")
    except SystemExit as exit_:
        if not started and exit_.code == 1 and HELP_FLAGS.intersection(argv[1:]):
            sys.exit(0)  # absl ends --help with status 1; command lines end a help request with 0
        raise


def override_error(argv: list[str], error: Exception) -> str:
    """One line for a ``--config.FIELD=VALUE`` override that failed while the flags were parsed (a typo in a field
    name, a value of the wrong type), naming the override."""
    overrides = [arg for arg in argv[1:] if arg.startswith("--config.")]
    while error.args and isinstance(error.args[0], Exception):  # ml_collections wraps a KeyError in an AttributeError
        error = error.args[0]
    message = " ".join(str(error.args[0] if isinstance(error, KeyError) and error.args else error).split())
    if isinstance(error, KeyError):
        message = f"the config has no field {message}"
    named = next((arg for arg in overrides if any(part in message for part in arg.split("=")[0].split(".")[1:])), None)
    return f"{named or ' '.join(overrides) or 'the command line'}: {message}"


def run_training(work: Callable[..., T], *args, **kwargs) -> T:
    """Runs a training command's work: a stop by SIGINT or SIGTERM (``rfa.train.TrainingInterrupted``, the last
    step's checkpoint saved) ends the command with one line and status 128 + signal; errors of a config, data
    or checkpoint end in one line (status 1).

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
    from rfa.train import TrainingInterrupted

    try:
        return work(*args, **kwargs)
    except one_line_errors() as error:
        sys.exit(f"error: {error}")
    except TrainingInterrupted as stop:
        print(f"{stop}; run the same command to resume", file=sys.stderr)
        sys.exit(stop.exit_status)
