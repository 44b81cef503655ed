"""Mutation testing by a tool: a fixed sample of mutmut's mutants of the math packages, run, and the score.

mutmut (configured in ``[tool.mutmut]`` of pyproject.toml) copies ``rfa`` to ``mutants/``, generates its mutants
(one operator, constant, argument or string of one function) of ``rfa/attention`` and ``rfa/random_features``, and
runs each against the fast tests (of ``tests/attention``, ``tests/random_features``, ``tests/test_bad_input.py``)
that called the mutated function. The whole set takes days on 2 cores, so this script keeps a deterministic sample:
the mutants whose SHA-256 with ``SEED`` falls in the first ``--fraction`` of the range, so the sample does not
depend on the order of the files and a change of the code adds or removes only its own mutants. It runs
``mutmut run`` on the sample and prints the counts, the survivors (``mutmut show NAME`` prints one) and the score:
killed (timeouts included) over all the mutants run, the survivors in ``EQUIVALENT`` left out; a mutant of a
function that no fast test calls ("no tests") counts as a survivor. docs/development.md, "Mutation testing", has
the last report.

Run: ``make mutation``, ``python tools/mutation_sample.py --fraction 0.1``, ``--list`` (the sample, not run), or
``python tools/mutation_sample.py NAME ...``: those mutants instead of the sample (the survivors, again).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

SEED = "rfa-mutation-1"
# Survivors of the sample that behave exactly like the original (docs/development.md says why, one by one).
EQUIVALENT: frozenset[str] = frozenset()
# Functions that only a subprocess of the fast tier runs (its 8 CPU devices need a process of their own): mutmut
# records the calls made in its own process, so it would find no test for them. They get that file's tests, and
# the file's time: mutmut times the tests' calls, not the fixture that starts the subprocess (about 30 s here),
# and stops a mutant's tests after 15x their time, which would stop every run of the file as a "timeout".
SEQUENCE_PARALLEL_TESTS = ("tests/attention/test_sequence_parallel.py", 60.0)  # (file, seconds it takes)
SUBPROCESS_TESTS = {
    "rfa.attention.kernelized.sequence_parallel.": SEQUENCE_PARALLEL_TESTS,
    "rfa.attention.kernelized.api.x_sequence_parallel_attention": SEQUENCE_PARALLEL_TESTS,
    "rfa.attention.kernelized.api.x__dense_mask_sequence_parallel": SEQUENCE_PARALLEL_TESTS,
    "rfa.attention.delta_rule.api.x__sequence_parallel": SEQUENCE_PARALLEL_TESTS,
}
KILLED, SURVIVED, TIMEOUT = {1, 3}, {0}, {24, -24, 36, 152, 255}  # mutmut's exit codes (255: the tests did not load)
STATUS = {0: "survived", 33: "no tests", None: "not run"}  # no tests: no fast test calls the function


def generate() -> dict[str, int | None]:
    """Copy the tree to mutants/ and generate mutmut's mutants (no test runs): name -> last exit code or None."""
    from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
    from mutmut.configuration import config

    os.makedirs("mutants", exist_ok=True)
    with contextlib.redirect_stdout(sys.stderr):  # mutmut's progress, off the list of names
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(os.cpu_count() or 2)
    results = {}
    for source in config().source_paths:
        for meta in sorted(pathlib.Path("mutants", source).rglob("*.py.meta")):
            results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


PROBE = """
import json, sys, pytest
from mutmut.state import state
pytest.main(["--rootdir=.", "--collect-only", "-qq", "-p", "no:xdist", *sys.argv[1:]])
print(json.dumps(sorted(state()._stats)))
"""


def widen_tests(mutant_names) -> list[str]:
    """Give the functions that run at import time every test of their package's tests/ folder, and those in
    ``SUBPROCESS_TESTS`` the tests of their file; returns the former.

    mutmut runs a mutant against the tests that called its function while it collected its stats, and credits
    the calls made while importing (the registries of feature maps and projection kinds, the closures that
    factories such as ``_derf_terms`` build) to the first test alone, so their mutants would survive. This
    collects the tests once with mutmut's stats switched on to find those functions, then lists, for each, the
    tests of ``tests/<package>/`` (``rfa/random_features/...`` -> ``tests/random_features/``) in mutmut's stats.
    """
    from mutmut.__main__ import collect_or_load_stats
    from mutmut.configuration import config
    from mutmut.utils.file_utils import setup_source_paths
    from mutmut.workers.isolation import get_mutant_runner

    setup_source_paths()
    with contextlib.redirect_stdout(sys.stderr):
        collect_or_load_stats(get_mutant_runner(2))  # the stats, as `mutmut run` collects them (once; cached)
    selection = config().pytest_add_cli_args_test_selection
    env = {**os.environ, "MUTANT_UNDER_TEST": "stats"}
    probe = [sys.executable, "-c", PROBE, *selection]
    out = subprocess.run(probe, cwd="mutants", env=env, capture_output=True, text=True, check=True).stdout
    at_import = json.loads(out.strip().splitlines()[-1])
    path = pathlib.Path("mutants", "mutmut-stats.json")
    stats = json.loads(path.read_text())
    prefixes = {function: "tests/" + function.split(".")[1] + "/" for function in at_import}
    for function in {name.rsplit("__mutmut_", 1)[0] for name in mutant_names}:
        for start, (file, seconds) in SUBPROCESS_TESTS.items():
            if function.startswith(start):
                prefixes[function] = file + "::"
                tests = [test for test in stats["duration_by_test"] if test.startswith(file + "::")]
                for test in tests:
                    stats["duration_by_test"][test] = max(stats["duration_by_test"][test], seconds / len(tests))
    for function, prefix in prefixes.items():
        tests = stats["tests_by_mangled_function_name"].setdefault(function, [])
        tests[:] = sorted(set(tests) | {test for test in stats["duration_by_test"] if test.startswith(prefix)})
    path.write_text(json.dumps(stats, indent=4))
    return at_import


def sampled(names, fraction: float) -> list[str]:
    """The names whose hash with SEED falls in the first ``fraction`` of the range, sorted."""

    def position(name: str) -> float:
        return int.from_bytes(hashlib.sha256(f"{SEED}:{name}".encode()).digest()[:8], "big") / 2**64

    return sorted(name for name in names if position(name) < fraction)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fraction", type=float, default=0.02, help="share of the mutants to run (default 0.02)")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--list", action="store_true", help="print the sample and stop")
    parser.add_argument("names", nargs="*", help="run these mutants (e.g. the survivors) instead of the sample")
    args = parser.parse_args()

    start = time.monotonic()
    generated = generate()
    names = sorted(args.names) if args.names else sampled(generated, args.fraction)
    print(f"{len(names)} of {len(generated)} mutants (fraction {args.fraction}, seed {SEED!r})", flush=True)
    if args.list:
        print("\n".join(names))
        return 0
    print(f"{len(widen_tests(names))} functions run at import: their mutants get their package's tests")
    mutmut = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())"]
    subprocess.run([*mutmut, "run", "--max-children", str(args.max_children), *names], check=True)

    codes = {name: code for name, code in generate().items() if name in set(names)}
    survivors = sorted(name for name, code in codes.items() if code in SURVIVED and name not in EQUIVALENT)
    counts = collections.Counter(
        STATUS.get(code, "killed" if code in KILLED else "timeout" if code in TIMEOUT else f"exit code {code}")
        for code in codes.values()
    )
    equivalent = sum(1 for name in names if name in EQUIVALENT and codes.get(name) in SURVIVED)
    print(f"\n{dict(sorted(counts.items()))}; {equivalent} of the survivors equivalent")
    for name in survivors:
        print(f"  survived: {name}  (mutmut show {name})")
    scored = counts["killed"] + counts["timeout"] + len(survivors) + counts["no tests"]
    killed = counts["killed"] + counts["timeout"]
    print(f"score: {killed} / {scored} non-equivalent mutants killed ({100 * killed / max(scored, 1):.1f}%)", end="")
    print(f", in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
