"""The training step of one model for every attention kind, timed side by side.

Run: ``rfa benchmark step_time`` (``make benchmark``). The recall study's model and data at the setting
``pairs4_l64`` (``rfa/configs/tasks/mqar.py``: a 2-layer decoder, d_model 64, 4 heads, batch 64, L = 64): one
optimizer step (forward, backward, AdamW) of each kind of ``--kinds``, compiled as ``rfa train`` compiles it, on one
batch, timed in turns (median of ``--repeats``, a new random order each round) so that the machine's noise falls on
every kind alike. Step times recorded by training runs made at different times beside other jobs cannot be
compared; these can. Writes JSON with each kind's time over exact attention's under ``ratios`` (which the speed
guard compares).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from rfa.configs.tasks import mqar
from rfa.experiments.benchmarks.common import environment
from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.cli import run_main
from rfa.experiments.report import markdown_table, output_path, write_json
from rfa.tasks import task_kind, train_batches
from rfa.train.config import check_config
from rfa.train.loop import initial_state
from rfa.train.steps import make_train_step

_KINDS = flags.DEFINE_list(
    "kinds",
    [
        "exact",
        "positive",
        "elu",
        "taylor",
        "gla",
        "deltanet",
        "gated_deltanet",
        "kda",
        "sliding_window",
        "hybrid_gated_deltanet",
    ],
    "Attention variants (rfa.train.ATTENTION_VARIANTS) to time.",
)
_SCALE = flags.DEFINE_string("scale", "pairs4_l64", "The scale of rfa/configs/tasks/mqar.py.")
_REPEATS = flags.DEFINE_integer("repeats", 15, "Timed steps per kind (median reported).")
_DATA_DIR = flags.DEFINE_string("data_dir", "data", "TFDS data_dir (the MQAR dataset is generated there).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_step_time.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON goes.")


def compiled_step(kind: str, scale: str, data_dir: str):
    """One training step of ``kind`` at ``scale``, compiled, with its state and one batch."""
    config = mqar.get_config(f"{kind},{scale}")
    config.data_dir = data_dir
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    options = task_kind(task.kind).data_options(config)
    batches = train_batches(
        task, data_dir=data_dir, batch_size=config.batch_size, max_length=config.max_length, seed=0, **options
    )
    batch = next(iter(batches))
    step = make_train_step(graphdef, kind=task.kind, label_smoothing=0.0, seed=config.seed)
    return step.lower(state, batch, jnp.int32(0)).compile(), state, batch


def seconds_per_step(runs: dict, repeats: int) -> dict:
    """Median seconds of each ``{kind: [compiled, state, batch]}``, in turns, a new random order each round."""
    for run in runs.values():
        run[1], sums = run[0](run[1], run[2], jnp.int32(0))  # the state is donated: keep the new one
        jax.block_until_ready(sums)
    times = {kind: [] for kind in runs}
    order = np.random.default_rng(0)
    names = list(runs)
    for i in range(repeats):
        for j in order.permutation(len(names)):
            run = runs[names[j]]
            began = time.perf_counter()
            run[1], sums = run[0](run[1], run[2], jnp.int32(i + 1))
            jax.block_until_ready(sums)
            times[names[j]].append(time.perf_counter() - began)
    return {kind: float(np.median(t)) for kind, t in times.items()}


def main(argv):
    del argv
    kinds = list(_KINDS.value)
    runs = {kind: list(compiled_step(kind, _SCALE.value, _DATA_DIR.value)) for kind in kinds}
    seconds = seconds_per_step(runs, _REPEATS.value)
    reference = seconds.get("exact")
    rows = [
        [kind, f"{1e3 * seconds[kind]:.1f}", "-" if reference is None else f"{seconds[kind] / reference:.2f}x"]
        for kind in kinds
    ]
    print(markdown_table(["kind", "ms per step", "/ exact"], rows))
    data = {
        "model": f"rfa/configs/tasks/mqar.py at {_SCALE.value}: its 2-layer decoder, batch and length",
        "environment": environment(),
        "seconds_per_step": seconds,
        "ratios": {} if reference is None else {f"{kind}_over_exact": seconds[kind] / reference for kind in kinds},
    }
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_step_time.json")
    write_json(output, data)
    print(f"\nwrote {output}")
    warn_against_committed(output, data)


if __name__ == "__main__":
    run_main(main)
