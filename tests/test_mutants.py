"""The mutant list of tools/mutants/ matches the code: each snippet occurs exactly once in its file, each test it
names exists, and no id is used twice."""

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tools" / "mutants"


def load_mutants():
    """The package tools/mutants/ by its path (tools/ is not on the path, and nothing is installed)."""
    spec = importlib.util.spec_from_file_location(
        "mutants", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module  # its relative imports, and dataclasses, look the package up there
    spec.loader.exec_module(module)
    return module


def test_every_mutant_still_applies():
    mutants = load_mutants()
    assert mutants.check_mutants(str(ROOT)) == []
    assert len(mutants.MUTANTS) >= 30
    for mutant in mutants.MUTANTS:
        assert mutant.original != mutant.mutated and mutant.tests, mutant.id


def test_every_record_module_is_in_the_list():
    """A record module left out of ``RECORDS`` would drop its mutants silently."""
    mutants = load_mutants()
    infrastructure = {"__init__", "__main__", "mutant", "paths", "report", "runner"}
    records = {path.stem for path in PACKAGE.glob("*.py")} - infrastructure
    assert {module.__name__.rpartition(".")[2] for module in mutants.RECORDS} == records
