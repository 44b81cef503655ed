"""Mutation testing: apply small deliberate bugs to the library one at a time and see a test fail.

Each :class:`Mutant` replaces one exact snippet of one file (it must occur exactly once) and names
the tests that must catch it. The runner copies the repository (tracked and untracked, not ignored
files) to a scratch directory once, applies each mutant there in turn, runs its tests with
``python -m pytest -x``, restores the file, and writes a report: a mutant is *killed* when its tests
fail and *survives* when they pass. Every listed mutant must be killed; a survivor means a test is
missing. Grow the list with every feature (tests/test_mutants.py checks that every snippet is
still in its file, so the list cannot silently go stale).

The records are kept by the package they mutate, a module per package and more for a large one
(``random_features.py``, ``attention.py``, ``attention_kernelized.py``, ..., ``docs_results.py``; ``paths.py``
holds the tests that several of them name); this module joins them into ``MUTANTS``. ``mutant.py`` holds the
record, ``runner.py`` the scratch copy, ``report.py`` the report, ``__main__.py`` the command.

Run: ``python tools/mutants`` (all, ~40 min on 2 cores), ``--only id1,id2`` for some,
``--report tools/mutants_report.md`` for where the report goes (default).
"""

from __future__ import annotations

import os

from . import (
    attention,
    attention_delta_rule,
    attention_kernelized,
    data,
    docs_results,
    experiments,
    experiments_studies,
    layers,
    layers_checkpoints,
    models,
    random_features,
    tasks,
    top_level,
    train,
)
from .mutant import ROOT

RECORDS = (  # the list's order: the library's layers from the bottom up, then the results
    random_features,
    attention,
    attention_kernelized,
    attention_delta_rule,
    layers,
    layers_checkpoints,
    models,
    data,
    tasks,
    train,
    top_level,
    experiments,
    experiments_studies,
    docs_results,
)
MUTANTS = [mutant for records in RECORDS for mutant in records.MUTANTS]


def check_mutants(root: str = ROOT) -> list[str]:
    """Problems with the list: unknown files or tests, snippets that do not occur exactly once, duplicate ids."""
    problems, seen = [], set()
    for mutant in MUTANTS:
        if mutant.id in seen:
            problems.append(f"{mutant.id}: duplicate id")
        seen.add(mutant.id)
        path = os.path.join(root, mutant.path)
        if not os.path.exists(path):
            problems.append(f"{mutant.id}: no file {mutant.path}")
            continue
        with open(path) as f:
            count = f.read().count(mutant.original)
        if count != 1:
            problems.append(f"{mutant.id}: its snippet occurs {count} times in {mutant.path}")
        for test in mutant.tests:
            file, _, name = test.partition("::")
            if not os.path.exists(os.path.join(root, file)):
                problems.append(f"{mutant.id}: no test file {file}")
            elif name:
                with open(os.path.join(root, file)) as f:
                    if f"def {name.partition('[')[0]}(" not in f.read():  # a parametrized test's case: its function
                        problems.append(f"{mutant.id}: no test {name} in {file}")
    return problems
