"""The causal kernelized form's speed in two versions of rfa, timed in interleaved runs (issue 69, item 9).

Run by hand: ``.venv/bin/python tools/interleaved_versions.py OLD NEW`` (commits; ``--rounds``, ``--length``).
Each version is checked out in a git worktree of its own and timed in a fresh process, the two in turns (their order
swapped every round), on one core (``taskset -c 0``) and on two: forward and backward of
``rfa.kernelized_attention`` with positive features, causal and bidirectional, at B = 1, H = 8, d = 64, m = 256
(the shapes of ``rfa benchmark attention``), the median of ``--repeats`` calls per process. A drift of the machine
falls on both versions alike; one round gives one ratio, and the rounds give their spread: the geometric mean of the
ratios with its 95% interval (a one-sample t on their logarithms, :func:`rfa.experiments.common.spread.compare`).
Writes ``results/causal_speed_versions_cpu.json`` (or ``--output``); ``--append`` adds the new rounds to the rounds
that file holds for the same two commits and shapes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "results" / "causal_speed_versions_cpu.json"
CORES = {"one core": "0", "two cores": "0,1"}

TIMING = """
import json, sys, time
import jax, jax.numpy as jnp
import rfa
length, repeats = int(sys.argv[1]), int(sys.argv[2])
keys = jax.random.split(jax.random.key(0), 4)
q, k, v = (0.5 * jax.random.normal(key, (1, length, 8, 64)) for key in keys[:3])
W = rfa.sample_projection(keys[3], 256, 64)

def loss(causal):
    def value(q, k, v):
        out = rfa.kernelized_attention(q, k, v, estimator="positive", projection=W, is_causal=causal)
        return jnp.sum(out * jnp.cos(jnp.arange(out.size).reshape(out.shape)))
    return jax.jit(jax.value_and_grad(value, argnums=(0, 1, 2))).lower(q, k, v).compile()

programs = {"causal": loss(True), "bidirectional": loss(False)}
for program in programs.values():
    jax.block_until_ready(program(q, k, v))
times = {name: [] for name in programs}
for _ in range(repeats):
    for name, program in programs.items():
        start = time.perf_counter()
        jax.block_until_ready(program(q, k, v))
        times[name].append(1e3 * (time.perf_counter() - start))
print(json.dumps({name: sorted(t)[len(t) // 2] for name, t in times.items()}))
"""


def worktree(commit: str, parent: pathlib.Path) -> pathlib.Path:
    path = parent / commit
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def time_version(tree: pathlib.Path, cores: str, length: int, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = ["taskset", "-c", cores, sys.executable, "-c", TIMING, str(length), str(repeats)]
    result = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def summary(rounds: list[dict], old: str, new: str) -> dict:
    from rfa.experiments.common.spread import compare

    out = {}
    for case in ("causal", "bidirectional"):
        ratios = [r[new][case] / r[old][case] for r in rounds]
        logs = compare({i: math.log(x) for i, x in enumerate(ratios)}, 0.0)
        out[case] = {
            "new_over_old_geometric_mean": math.exp(logs.difference),
            "new_over_old_interval": [math.exp(logs.low), math.exp(logs.high)],
            "new_over_old_p": logs.p,
            "median_ms": {v: statistics.median(r[v][case] for r in rounds) for v in (old, new)},
            "new_over_old": ratios,
            "new_over_old_median": statistics.median(ratios),
            "rounds_new_slower": sum(x > 1 for x in ratios),
        }
    causal_over_bidirectional = {v: [r[v]["causal"] / r[v]["bidirectional"] for r in rounds] for v in (old, new)}
    out["causal_over_bidirectional"] = {v: statistics.median(x) for v, x in causal_over_bidirectional.items()}
    out["causal_over_bidirectional_rounds"] = causal_over_bidirectional
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    parser.add_argument("--append", action="store_true", help="add the rounds to those the output file holds")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from rfa.experiments.common.timing import environment

    commits = {
        name: subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", c], capture_output=True, text=True
        ).stdout.strip()
        for name, c in (("old", args.old), ("new", args.new))
    }
    old, new = commits["old"], commits["new"]
    config = {"length": args.length, "batch": 1, "heads": 8, "head_dim": 64, "num_features": 256}
    config |= {"repeats": args.repeats, "old": old, "new": new}
    earlier = {label: [] for label in CORES}
    if args.append:
        committed = json.loads(args.output.read_text())
        same = {name: value for name, value in committed["config"].items() if name != "rounds"}
        if same != config:
            sys.exit(f"--append: {args.output} holds the rounds of {same}, not of {config}")
        earlier = {label: committed["results"][label]["rounds"] for label in CORES}
    results = {}
    with tempfile.TemporaryDirectory() as parent:
        trees = {c: worktree(c, pathlib.Path(parent)) for c in (old, new)}
        try:
            for label, cores in CORES.items():
                rounds = list(earlier[label])
                for i in range(len(rounds), len(rounds) + args.rounds):
                    order = (old, new) if i % 2 == 0 else (new, old)
                    rounds.append({c: time_version(trees[c], cores, args.length, args.repeats) for c in order})
                    print(label, i, json.dumps(rounds[-1]), flush=True)
                results[label] = {"rounds": rounds, "summary": summary(rounds, old, new)}
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    out = {
        "config": config | {"rounds": len(results["one core"]["rounds"])},
        "results": results,
        "environment": environment(),
    }
    args.output.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
