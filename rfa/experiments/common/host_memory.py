"""Transparent huge pages for rfa's commands on Linux: fewer page faults for XLA:CPU's large buffers.

XLA:CPU takes each large buffer fresh from the system, so with glibc's defaults a buffer of many MB costs a page fault
per 4 KiB each time it is allocated. That kernel time depends on the allocator, not on the model: a third of the CPU
time of a recall training step at 128 tokens (Gated DeltaNet, one core: 0.486 s a step with glibc's defaults,
0.338 s with huge pages), over half of kernelized attention's at L = 8192 (``docs/results/benchmarks.md``). glibc
reads its tunables when a process starts, so a command that wants huge pages re-executes itself with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (2 MiB pages where the kernel's transparent huge pages allow them:
``madvise`` or ``always``). A ``GLIBC_TUNABLES`` already set, even empty, is left as it is: the way to opt out.
"""

from __future__ import annotations

import os
import sys

HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"
"""glibc's tunable that has malloc ask for transparent huge pages (2 MiB)."""


def reexecute_with_huge_pages(arguments: list[str]) -> None:
    """Replaces this process by ``python ARGUMENTS`` (``["-m", module, *flags]``) with glibc allocating transparent
    huge pages; returns at once where ``GLIBC_TUNABLES`` is set (already re-executed, or the user's own) or where the
    system is not Linux (no glibc tunables).

    Example:
      >>> reexecute_with_huge_pages(["-m", "rfa.experiments", "train", "--config", "sort"])  # doctest: +SKIP
    """
    if "GLIBC_TUNABLES" in os.environ or not sys.platform.startswith("linux"):
        return
    os.execve(sys.executable, [sys.executable, *arguments], {**os.environ, "GLIBC_TUNABLES": HUGE_PAGES_TUNABLE})
