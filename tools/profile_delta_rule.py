"""Where the chunked delta rule's time goes on XLA:CPU: a per-op profile of Gated DeltaNet's chunk and KDA's.

Run by hand (``.venv/bin/python tools/profile_delta_rule.py``; a few minutes on 2 cores). At the shapes of
``rfa benchmark delta_rule`` (B = 1, H = 8, d = 64, chunks of 64, L = 4096, float32, forward and backward), each
kind's compiled program runs 3 times under ``jax.profiler.trace``; every op's time in the trace (``ProfileData``,
summed over XLA:CPU's threads, so more than the wall time) is charged to the part of the chunked form whose named
scope its JAX name carries (:data:`PARTS`; the backward's ops carry them too), and
``results/profile_delta_rule_cpu.json`` gets, per kind, the op time per call, its share per part, and the 12
slowest ops.
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
import sys
import tempfile

import jax
import jax.numpy as jnp

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rfa  # noqa: E402
from rfa.experiments.common.timing import environment  # noqa: E402

B, H, D, L, CHUNK, CALLS = 1, 8, 64, 4096, 64, 3
OUTPUT = ROOT / "results" / "profile_delta_rule_cpu.json"


def inputs(per_channel: bool) -> tuple:
    keys = jax.random.split(jax.random.key(0), 5)
    q, k = (jax.random.normal(key, (B, L, H, D)) for key in keys[:2])
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
    v, beta = jax.random.normal(keys[2], (B, L, H, D)), jax.nn.sigmoid(jax.random.normal(keys[3], (B, L, H)))
    g = jax.nn.log_sigmoid(3.0 + jax.random.normal(keys[4], (B, L, H, D) if per_channel else (B, L, H)))
    return q, k, v, beta, g


def loss(q, k, v, beta, g):
    out = rfa.attention.delta_rule_attention(q, k, v, beta, log_decay=g, chunk_size=CHUNK)
    return jnp.sum(out * jnp.cos(jnp.arange(out.size).reshape(out.shape)))


PARTS = ("chunk_scores", "chunk_decays", "triangular_solve", "state_scan")
"""The named scopes of ``rfa/attention/delta_rule/chunked.py``; an op in none of them is ``other`` (the layout into
chunks and back, the loss)."""


def part_of(op_name: str) -> str:
    """The part of the chunked form an op's JAX name (``op_name``, forward or backward) lies in."""
    for part in PARTS:
        if f"/{part}/" in op_name:
            return part
    return "other"


def op_parts(hlo: str) -> dict[str, tuple[str, str]]:
    """Each instruction of the compiled program: ``(part, op_name)`` from its metadata."""
    parts = {}
    for match in re.finditer(r"^\s*(?:ROOT )?%?([\w.-]+) = [^\n]*$", hlo, re.MULTILINE):
        op_name = re.search(r'op_name="([^"]*)"', match.group(0))
        op_name = op_name.group(1) if op_name else ""
        parts[match.group(1)] = (part_of(op_name), op_name)
    return parts


def profile(per_channel: bool) -> dict:
    args = inputs(per_channel)
    program = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))).lower(*args).compile()
    jax.block_until_ready(program(*args))
    with tempfile.TemporaryDirectory() as trace:
        with jax.profiler.trace(trace):
            for _ in range(CALLS):
                jax.block_until_ready(program(*args))
        (path,) = pathlib.Path(trace).rglob("*.xplane.pb")
        data = jax.profiler.ProfileData.from_file(str(path))
    sources = op_parts(program.as_text())
    op_ns = collections.Counter()
    for plane in data.planes:
        for line in plane.lines:
            for event in line.events:
                if event.name in sources:  # an op of the program (not the runtime's or Python's frames)
                    op_ns[event.name] += event.duration_ns
    per_call = {name: ns / CALLS / 1e6 for name, ns in op_ns.items()}
    total = sum(per_call.values())
    by_part = collections.Counter()
    for name, ms in per_call.items():
        by_part[sources[name][0]] += ms
    return {
        "op_ms": total,
        "by_part": {part: {"ms": ms, "share": ms / total} for part, ms in by_part.most_common()},
        "slowest_ops": [
            {"op": name, "part": sources[name][0], "op_name": sources[name][1], "ms": ms, "share": ms / total}
            for name, ms in sorted(per_call.items(), key=lambda item: -item[1])[:12]
        ],
    }


def main() -> None:
    kinds = {"gated_deltanet": False, "kda": True}
    results = {
        "config": {"batch": B, "heads": H, "head_dim": D, "length": L, "chunk_size": CHUNK, "calls": CALLS},
        "kinds": {kind: profile(per_channel) for kind, per_channel in kinds.items()},
        "environment": environment(),
    }
    OUTPUT.write_text(json.dumps(results, indent=1) + "\n")
    for kind, result in results["kinds"].items():
        print(f"{kind}: {result['op_ms']:.0f} ms of ops per call")
        for name, share in result["by_part"].items():
            print(f"  {100 * share['share']:5.1f}%  {share['ms']:7.1f} ms  {name}")
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
