"""Short demo of the core primitives: estimator MSEs (closed form vs Monte Carlo) and attention errors.

Run: ``python -m experiments.demo --workdir workdir/demo`` (``make reproduce``). Takes about a minute
on 2 CPU cores and writes ``estimator_mse.csv``, ``attention_error.csv`` and ``report.md`` to the
workdir. It is the README's main job until the config-driven experiment runner exists.
"""

from __future__ import annotations

import csv
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import rfa
from experiments.tables import markdown_table

_WORKDIR = flags.DEFINE_string("workdir", "workdir/demo", "Where the tables are written.")
_DRAWS = flags.DEFINE_integer("draws", 4000, "Monte Carlo draws per estimator and pair.")

DIM, NUM_FEATURES = 16, 64
GEOMETRIES = [(1.0, 60), (1.0, 120), (1.0, 150), (1.5, 150)]  # (|x| = |y|, angle in degrees)
ESTIMATORS = [
    ("trig", "iid"),
    ("positive", "iid"),
    ("hyperbolic", "iid"),
    ("oprf", "iid"),
    ("positive", "orthogonal"),
    ("oprf", "orthogonal"),
]


def pair(length: float, degrees: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Two vectors of norm ``length`` at angle ``degrees`` in the first two coordinates."""
    x, y = np.zeros((2, dim), np.float32)
    x[0] = length
    y[0], y[1] = length * math.cos(math.radians(degrees)), length * math.sin(math.radians(degrees))
    return x, y


def draws(estimator: str, kind: str, x: np.ndarray, y: np.ndarray, num_draws: int) -> np.ndarray:
    """``[num_draws, pairs]`` estimates of SM(x, y), one fresh projection per draw."""

    def estimate(key):
        return rfa.estimate_softmax_kernel(x, y, rfa.sample_projection(key, NUM_FEATURES, DIM, kind=kind), estimator)

    return np.asarray(jax.jit(jax.vmap(estimate))(jax.random.split(jax.random.key(0), num_draws)), np.float64)


def estimator_rows(num_draws: int) -> list[dict]:
    pairs = [pair(length, degrees, DIM) for length, degrees in GEOMETRIES]
    x, y = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    exact = np.asarray(rfa.softmax_kernel(x, y), np.float64)
    rows = []
    for estimator, kind in ESTIMATORS:
        sq = (draws(estimator, kind, x, y, num_draws) - exact) ** 2
        theory = np.asarray(rfa.theory.mse(estimator, x, y, NUM_FEATURES, orthogonal=kind == "orthogonal"))
        for i, (length, degrees) in enumerate(GEOMETRIES):
            rows.append(
                {
                    "estimator": estimator,
                    "projection": kind,
                    "norm": length,
                    "angle": degrees,
                    "kernel": exact[i],
                    "mse_theory": float(theory[i]),
                    "mse_monte_carlo": sq[:, i].mean(),
                    "standard_error": sq[:, i].std() / math.sqrt(num_draws),
                }
            )
    return rows


def attention_rows() -> list[dict]:
    length, heads, dim = 1024, 4, 16
    rows = []
    for scale in (0.5, 1.0):
        q_key, k_key, v_key = jax.random.split(jax.random.key(1), 3)
        q = scale * jax.random.normal(q_key, (1, length, heads, dim))
        k = scale * jax.random.normal(k_key, (1, length, heads, dim))
        v = jax.random.normal(v_key, (1, length, heads, dim))
        exact = rfa.softmax_attention(q, k, v)
        baseline = float(jnp.mean((jnp.mean(v, axis=1, keepdims=True) - exact) ** 2))
        for estimator, kind in ESTIMATORS:
            for m in (16, 64, 256):
                W = rfa.sample_projection(jax.random.key(m), m, dim, kind=kind)
                out = rfa.kernelized_attention(q, k, v, feature_map=estimator, projection=W)
                mse = float(jnp.mean((out - exact) ** 2))
                rows.append(
                    {
                        "input_scale": scale,
                        "estimator": estimator,
                        "projection": kind,
                        "m": m,
                        "mse": mse,
                        "mean_of_v_mse": baseline,
                    }
                )
    return rows


def write_csv(path: str, rows: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def markdown(rows: list[dict], columns: list[str]) -> str:
    def cell(value):
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    return markdown_table(columns, [[cell(row[c]) for c in columns] for row in rows])


def main(argv):
    del argv
    os.makedirs(_WORKDIR.value, exist_ok=True)
    estimators = estimator_rows(_DRAWS.value)
    attention = attention_rows()
    write_csv(os.path.join(_WORKDIR.value, "estimator_mse.csv"), estimators)
    write_csv(os.path.join(_WORKDIR.value, "attention_error.csv"), attention)
    estimator_columns = ["estimator", "projection", "norm", "angle", "kernel", "mse_theory", "mse_monte_carlo"]
    report = "\n\n".join(
        [
            f"# rfa demo\n\n## MSE of SM(x, y) estimators, d = {DIM}, m = {NUM_FEATURES}: closed form vs Monte Carlo",
            markdown(estimators, [*estimator_columns, "standard_error"]),
            "## Kernelized attention output MSE vs exact softmax attention (L = 1024, d = 16, q, k ~ N(0, s²))",
            markdown(attention, ["input_scale", "estimator", "projection", "m", "mse", "mean_of_v_mse"]),
        ]
    )
    path = os.path.join(_WORKDIR.value, "report.md")
    with open(path + ".tmp", "w") as f:
        f.write(report + "\n")
    os.replace(path + ".tmp", path)
    print(report)
    print(f"\nWrote {path} and the CSV tables beside it.")


if __name__ == "__main__":
    app.run(main)
