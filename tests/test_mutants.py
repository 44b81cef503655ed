"""The mutant list of tools/mutants.py matches the code: each snippet occurs exactly once in its file
and each test it names exists."""

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_mutants():
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "tools" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_mutant_still_applies():
    mutants = load_mutants()
    assert mutants.check_mutants(str(ROOT)) == []
    assert len(mutants.MUTANTS) >= 30
    for mutant in mutants.MUTANTS:
        assert mutant.original != mutant.mutated and mutant.tests, mutant.id
