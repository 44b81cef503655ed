from __future__ import annotations

import numpy as np
from absl import flags
from flax import nnx

from rfa.experiments.benchmarks.decoding import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.decoding.report import table
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.report import output_path, write_json
from rfa.experiments.common.timing import compiled_decoder, environment, medians_in_turns
from rfa.models import Decoder, Site, preset

_POSITIONS = flags.DEFINE_list("positions", ["128", "512", "2048", "8192"], "Decoding positions to time.")
_STEPS = flags.DEFINE_integer("steps", 64, "Tokens decoded per timed call (one jitted scan).")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed calls per position (median reported).")
_KINDS = flags.DEFINE_list("kinds", None, "Kinds of KINDS to time (default: all; kernelized is always timed).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_decoding.json.")
_WORKDIR = flags.DEFINE_string(
    "workdir", "workdir/benchmarks", "Where the JSON (and figure) go unless --output is given."
)
KINDS = {
    "exact": Site(),
    "kernelized": Site("positive", num_features=64),
    "rfa": Site("rfa", num_features=64),  # gated RFA's map ungated: 2m = 128 features
    "gated_rfa": Site("rfa", num_features=64, gated=True),
    "gla": Site("elu", gated=True, gate="feature"),
    "deltanet": Site("deltanet"),
    "gated_deltanet": Site("gated_deltanet"),
    "kda": Site("kda"),
    "sliding_window": Site("sliding_window", window=64),  # a window of 64 tokens
    "hybrid": (Site("gated_deltanet"), Site()),  # Gated DeltaNet below an exact layer
}
RECURRENT = ("kernelized", "rfa", "gated_rfa", "gla", "deltanet", "gated_deltanet", "kda", "sliding_window")
"""The kinds whose step should not grow with position."""
GATED = ("gated_rfa", "gla", "gated_deltanet", "kda")
"""Target: within 2x of ungated kernelized attention per token."""


GUARD_TOLERANCE = 0.5
"""The speed guard's tolerance for these ratios: a token takes 10–50 µs here, and a kind's time moved by up to a
third between two quiet runs; the slowdown the guard is for (a host call per token) was 10–45x."""


def summarize(results: dict, checks_cost: dict, positions: list[int]) -> dict:
    """The JSON of a run: seconds per token per kind and position, and under ``ratios`` what the speed guard
    compares: each kind's time at the last position over the first, and the medians over the positions of the
    checked step's time over the unchecked one's and of its time over kernelized attention's."""
    first, last = positions[0], positions[-1]
    return {
        "model": "tiny decoder (d_model 32, 4 heads, 2 layers), batch 1; kernelized = positive, m = 64; "
        "rfa = RFA's map, m = 64 (2m = 128 features); gated_rfa = the same, gated=True; gla = elu, a gate per "
        "feature; hybrid = Gated DeltaNet, then exact",
        "environment": environment(),
        "seconds_per_token": {name: {str(p): t for p, t in times.items()} for name, times in results.items()},
        "checks_over_unchecked_per_position": {
            name: {str(p): checks_cost[(name, p)] for p in positions} for name in results
        },
        "ratios": {
            "last_vs_first": {
                name: results[name][last] / results[name][first] for name in RECURRENT if name in results
            },
            "checks_over_unchecked": {
                name: float(np.median([checks_cost[(name, p)] for p in positions])) for name in results
            },
            "over_kernelized": {
                name: float(np.median([results[name][p] / results["kernelized"][p] for p in positions]))
                for name in results
                if name != "kernelized"
            },
        },
        "guard_tolerance": GUARD_TOLERANCE,
    }


def main(argv):
    del argv
    positions = [int(p) for p in _POSITIONS.value]
    kinds = {name: KINDS[name] for name in KINDS if not _KINDS.value or name in {*_KINDS.value, "kernelized"}}
    runs = {}
    for name, attention in kinds.items():
        config = preset("tiny", vocab_size=256, max_length=max(positions) + _STEPS.value, decoder_attention=attention)
        model = Decoder(config, rngs=nnx.Rngs(0))
        for p in positions:
            for checks in (True, False):
                runs[(name, p, checks)] = compiled_decoder(model, p, _STEPS.value, checks=checks)
    timed = medians_in_turns(runs, _REPEATS.value, per=_STEPS.value)  # every (kind, position, checks) in turn
    results = {name: {p: timed[(name, p, True)] for p in positions} for name in kinds}
    checks_cost = {(name, p): timed[(name, p, True)] / timed[(name, p, False)] for name in kinds for p in positions}
    summary = summarize(results, checks_cost, positions)
    ratios = summary["ratios"]
    print(table(summary))
    first, last = positions[0], positions[-1]
    for name, ratio in ratios["last_vs_first"].items():
        verdict = "met" if ratio <= 1.2 else "NOT met"
        print(f"{name}: time per token at {last} is {ratio:.2f}x its time at {first} (target <= 1.2x: {verdict}).")
    for name in (g for g in GATED if g in kinds):
        ratio = ratios["over_kernelized"][name]
        verdict = "met" if ratio <= 2 else "NOT met"
        print(f"{name}: {ratio:.2f}x kernelized attention per token (target <= 2x: {verdict}).")
    worst = max(ratios["checks_over_unchecked"].values())
    verdict = "met" if worst <= 1.1 else "NOT met"
    print(f"the run-time checks cost at most {worst:.2f}x a decoded token, as medians (target <= 1.1x: {verdict}).")
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_decoding.json")
    write_json(output, summary)
    print(f"\nwrote {output}")
    warn_against_committed(output, summary)


if __name__ == "__main__":
    run_main(main)
