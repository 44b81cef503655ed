"""What a finished training run records: ``results.json`` (its metrics, cost and settings) and ``curves.png``."""

from __future__ import annotations

import json
import os

import jax
import ml_collections
import numpy as np

from rfa.tasks import Task, task_kind
from rfa.train.attention import layer_site
from rfa.train.metrics import plot_curves, read_metrics
from rfa.workdir import write_atomic


def finish(
    workdir: str,
    config: ml_collections.ConfigDict,
    task: Task,
    num_params: int,
    compiled,
    test: dict,
    input_work: np.ndarray,
    *,
    write: bool,
) -> dict:
    """The run's results (what ``results.json`` holds); ``write``: also ``curves.png`` and ``results.json``.

    ``compiled`` is the compiled training step (None: no step ran in this launch), ``test`` the final checkpoint's
    metrics on the test split, ``input_work`` the examples each process read per training step of this launch.
    """
    records = read_metrics(workdir)
    step_times = [r["step_time_s"] for r in records if r["split"] == "train" and "step_time_s" in r]
    tokens = [r["tokens_per_s"] for r in records if r["split"] == "train" and "tokens_per_s" in r]
    results = {
        "task": config.task,
        "kind": task.kind,
        "attention": config.attention.variant,
        "attention_kind": config.attention.kind,  # the variant's kind, or a --config.attention.kind override
        "qk_map": config.attention.get("qk_map") or None,  # the kernelized delta rule's estimator
        "num_features": recorded_num_features(config.attention),
        "steps": config.num_train_steps,
        "seed": config.seed,
        "parameters": int(num_params),
        "validation": [r for r in records if r["split"] == "validation"][-1],
        "test": {"step": config.num_train_steps, **test},
        "step_time_s": float(np.median(step_times)) if step_times else None,
        "tokens_per_s": float(np.median(tokens)) if tokens else None,
        "step_memory_bytes": memory_bytes(compiled) if compiled is not None else None,
        "devices": jax.device_count(),
        "backend": jax.default_backend(),
        "input_examples_per_step": [float(x) for x in input_work],  # per process: B / processes where rows are examples
        "glibc_tunables": os.environ.get(
            "GLIBC_TUNABLES"
        ),  # rfa's commands: huge pages (rfa.experiments.common.host_memory)
    }
    results |= task_kind(task.kind).results(config)
    if write:
        plot_curves(workdir, task_kind(task.kind).curves)
        write_atomic(os.path.join(workdir, "results.json"), json.dumps(results, indent=2) + "\n")
    return results


def memory_bytes(compiled) -> int:
    """XLA's estimate of a step's peak memory: arguments + outputs + temporaries, less donated buffers."""
    stats = compiled.memory_analysis()
    if stats is None:
        return 0
    return (
        stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    )


def recorded_num_features(attention: ml_collections.ConfigDict) -> int | None:
    """The m a run records: its kind's size where it means something (:meth:`rfa.layers.KindOptions.size`: m of a
    map that uses it, the delta rule's with an estimator's map that does, a window), else None.

    Example:
      >>> from rfa.train.config import task_config
      >>> recorded_num_features(task_config("sort", "positive").attention)
      64
      >>> recorded_num_features(task_config("sort", "exact").attention) is None
      True
    """
    return layer_site(attention.to_dict()).options.size()
