"""The command: ``python tools/mutants [--only id1,id2] [--report PATH] [--timeout SECONDS]``."""

import argparse
import os
import sys

# `python tools/mutants` puts tools/mutants/ first on the path; tools/ instead, to import the package by its name.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import mutants  # noqa: E402
from mutants.mutant import ROOT  # noqa: E402
from mutants.runner import run  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=mutants.__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mutant ids (default: all)")
    parser.add_argument("--report", default=os.path.join(ROOT, "tools", "mutants_report.md"))
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant's tests")
    args = parser.parse_args(argv)
    problems = mutants.check_mutants()
    if problems:
        print("the mutant list is out of date:\n" + "\n".join(problems), file=sys.stderr)
        return 2
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {m.id for m in mutants.MUTANTS}
    if unknown:
        print(f"unknown mutant ids: {sorted(unknown)}", file=sys.stderr)
        return 2
    results = run([m for m in mutants.MUTANTS if not wanted or m.id in wanted], args.report, args.timeout)
    survivors = [m.id for m, outcome, _, _ in results if outcome != "killed"]
    print(f"\n{len(results) - len(survivors)} of {len(results)} killed; report: {args.report}")
    if survivors:
        print(f"not killed: {survivors}", file=sys.stderr)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
