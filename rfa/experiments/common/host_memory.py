"""Transparent huge pages for rfa's commands on Linux: fewer page faults for XLA:CPU's large buffers.

XLA:CPU takes each large buffer fresh from the system, so with glibc's defaults a buffer of many MB costs a page fault
per 4 KiB each time it is allocated. That kernel time depends on the allocator, not on the model: a third of the CPU
time of a recall training step at 128 tokens (Gated DeltaNet, one core: 0.486 s a step with glibc's defaults,
0.338 s with huge pages), over half of kernelized attention's at L = 8192 (``docs/results/benchmarks.md``). glibc
reads its tunables when a process starts, so a command that wants huge pages re-executes itself with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (2 MiB pages where the kernel's transparent huge pages allow them:
``madvise`` or ``always``). A ``GLIBC_TUNABLES`` already set, even empty, is left as it is: the way to opt out.

The new process runs the rfa that is running now. ``python -m`` puts the current directory first on ``sys.path``,
and an editable install's finder comes after the path finder, so from a directory holding a checkout named ``rfa``
(its root: no ``__init__.py``), or a project of the user's of that name, ``python -m rfa.experiments`` would import
that directory as ``rfa`` (``ModuleNotFoundError: No module named 'rfa.experiments.legacy'`` from the checkout's
``experiments/``). So the re-execution passes ``-P`` (Python's safe path: no directory of its own first), unless
the directory Python put first is where the running rfa came from (``python -m`` from an uninstalled checkout's
root), which then stays. What a command imports from the current directory on purpose is unchanged: a config file
by its path (``--config my_config.py``) and ``config.modules`` / ``--modules`` (:func:`rfa.workdir.import_modules`
adds the directory after rfa is imported).
"""

from __future__ import annotations

import os
import sys

HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"
"""glibc's tunable that has malloc ask for transparent huge pages (2 MiB)."""

RFA_PARENT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
"""The directory that holds the running ``rfa`` package (this file is ``rfa/experiments/common/host_memory.py``)."""


def safe_path_flags(path: list[str] | None = None) -> list[str]:
    """The interpreter flags that make a new ``python`` import the rfa running now: ``["-P"]`` (no directory of its
    own first on ``sys.path``, so none where the user stands shadows rfa), or none where that first directory
    (``path[0]``, default ``sys.path[0]``: the current directory under ``python -m``) is where rfa came from.

    Example:
      >>> safe_path_flags(["/usr/bin", *sys.path[1:]])  # a console script's directory first: never rfa's
      ['-P']
      >>> safe_path_flags([RFA_PARENT, *sys.path[1:]])  # python -m from the checkout that is running
      []
    """
    path = sys.path if path is None else path
    if sys.flags.safe_path or not path:
        return ["-P"]
    first = os.path.realpath(path[0] or os.getcwd())  # "" (python -c) is the current directory
    return [] if first == os.path.realpath(RFA_PARENT) else ["-P"]


def reexecute_with_huge_pages(arguments: list[str]) -> None:
    """Replaces this process by ``python ARGUMENTS`` (``["-m", module, *flags]``) with glibc allocating transparent
    huge pages, importing the rfa running now (:func:`safe_path_flags`); returns at once where ``GLIBC_TUNABLES`` is
    set (already re-executed, or the user's own) or where the system is not Linux (no glibc tunables).

    Example:
      >>> reexecute_with_huge_pages(["-m", "rfa.experiments", "train", "--config", "sort"])  # doctest: +SKIP
    """
    if "GLIBC_TUNABLES" in os.environ or not sys.platform.startswith("linux"):
        return
    command = [sys.executable, *safe_path_flags(), *arguments]
    os.execve(sys.executable, command, {**os.environ, "GLIBC_TUNABLES": HUGE_PAGES_TUNABLE})
