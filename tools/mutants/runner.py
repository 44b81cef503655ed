"""The runner: each mutant applied in turn to one scratch copy of the repository, and its tests run there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from .mutant import ROOT, Mutant
from .report import write_report


def _copy_repository(destination: str) -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if os.path.exists(os.path.join(ROOT, name)):
            os.makedirs(os.path.dirname(os.path.join(destination, name)) or destination, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), os.path.join(destination, name))


def run(mutants: list[Mutant], report_path: str, timeout: int) -> list[tuple[Mutant, str, str, float]]:
    """Applies each mutant in a scratch copy, runs its tests; returns ``(mutant, outcome, detail, seconds)``."""
    results = []
    with tempfile.TemporaryDirectory(prefix="rfa-mutants-") as scratch:
        _copy_repository(scratch)
        for mutant in mutants:
            path = os.path.join(scratch, mutant.path)
            with open(path) as f:
                pristine = f.read()
            with open(path, "w") as f:
                f.write(pristine.replace(mutant.original, mutant.mutated, 1))
            start = time.perf_counter()
            try:
                completed = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "--no-header", *mutant.tests],
                    cwd=scratch,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
                # pytest exits 1 when tests fail; 2-5 mean the run itself broke (a mutant that does not import).
                outcome = {0: "survived", 1: "killed"}.get(completed.returncode, f"error (exit {completed.returncode})")
                failed = [line for line in completed.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
                detail = failed[0] if failed else completed.stdout.strip().splitlines()[-1:][0]
            except subprocess.TimeoutExpired:
                outcome, detail = "timeout", f"tests ran over {timeout} s"
            finally:
                with open(path, "w") as f:
                    f.write(pristine)
            seconds = time.perf_counter() - start
            results.append((mutant, outcome, detail, seconds))
            print(f"{outcome:>8}  {mutant.id}  ({seconds:.0f} s)  {detail}", flush=True)
    write_report(results, report_path)
    return results
