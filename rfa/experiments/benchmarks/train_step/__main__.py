from __future__ import annotations

import importlib
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from rfa.experiments.benchmarks.guard import warn_against_committed
from rfa.experiments.benchmarks.train_step import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.train_step.report import table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.host_memory import reexecute_with_huge_pages
from rfa.experiments.common.report import output_path, setting_name, write_json
from rfa.experiments.common.study_settings import pair_config, pairs, settings, training_config
from rfa.experiments.common.timing import (
    HUGE_PAGES_HELP,
    compiled_decoder,
    environment,
    medians_in_turns,
)
from rfa.models import Decoder
from rfa.tasks import get_task, task_kind, train_batches
from rfa.train.config import build_model, check_config
from rfa.train.loop import initial_state
from rfa.train.results import recorded_num_features
from rfa.train.steps import make_train_step

CONFIGS = ("compare_kernels:sort", "recall", "recall:pairs4_l64", "recall:pairs4_l128")
"""The study configs whose tables show a cost column: the sort table of training.md and the recall tables."""

_CONFIGS = flags.DEFINE_list(
    "configs",
    list(CONFIGS),
    "Study configs (rfa/configs/studies/<study>.py[:<variant>], compare_kernels or recall) whose settings to time.",
)
_KINDS = flags.DEFINE_list("kinds", [], "Time only these attention variants of each config (empty: all of them).")
_REPEATS = flags.DEFINE_integer("repeats", 15, "Timed rounds (each setting's median reported).")
_DECODE_STEPS = flags.DEFINE_integer("decode_steps", 16, "Tokens decoded per timed call, ending at the length.")
_DATA_DIR = flags.DEFINE_string("data_dir", "data", "TFDS data_dir (the tasks' datasets are generated there).")
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_train_step.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON goes.")
_HUGE_PAGES = flags.DEFINE_bool("huge_pages", True, HUGE_PAGES_HELP)


def study_config(name: str):
    """The study config ``<study>[:<variant>]`` of ``rfa/configs/studies/``."""
    study, _, variant = name.partition(":")
    return importlib.import_module(f"rfa.configs.studies.{study}").get_config(variant or None)


def training_configs(name: str, data_dir: str, kinds=()) -> list:
    """The training config of every setting the study config ``name`` trains, built as the study builds it
    (:mod:`rfa.experiments.common.study_settings`: recall's settings, compare_kernels' pairs), reading data from
    ``data_dir``; only the kinds of ``kinds`` where given."""
    study = study_config(name)
    study.data_dir = data_dir
    if name.partition(":")[0] == "recall":
        configs = [training_config(study, attention, m) for attention, m in settings(study)]
    elif name.partition(":")[0] == "compare_kernels":
        configs = [pair_config(study, task, attention) for task, attention in pairs(study)]
    else:
        raise ValueError(f"--configs: {name!r} is not a config of the recall or compare_kernels study.")
    return [c for c in configs if not kinds or c.attention.variant in kinds]


def _setting(config) -> dict:
    """What a run of ``config`` records of its attention (``rfa.train.loop``): its variant, m where it means
    something, the delta rule's estimator map."""
    return {
        "attention": config.attention.variant,
        "num_features": recorded_num_features(config.attention),
        "qk_map": config.attention.get("qk_map") or None,
    }


def compiled_step(config):
    """One training step of ``config``, compiled, with its state and one batch."""
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    options = task_kind(task.kind).data_options(config)
    batches = train_batches(
        task,
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        seed=0,
        **options,
    )
    batch = next(iter(batches))
    step = make_train_step(graphdef, kind=task.kind, label_smoothing=0.0, seed=config.seed)
    return step.lower(state, batch, jnp.int32(0)).compile(), state, batch


def compiled_decode(config, steps: int):
    """The setting's decoder generating ``steps`` tokens up to ``config.max_length``, compiled, and its arguments;
    None where the task's model is not a decoder."""
    model = build_model(config, get_task(config.task))
    if not isinstance(model, Decoder):
        return None
    return compiled_decoder(model, config.max_length - steps, steps, checks=True)


def seconds_per_step(runs: dict, repeats: int) -> dict:
    """Median seconds of each ``{key: [compiled, state, batch]}``, in turns, a new random order each round."""
    for run in runs.values():
        run[1], sums = run[0](run[1], run[2], jnp.int32(0))  # the state is donated: keep the new one
        jax.block_until_ready(sums)
    times = {key: [] for key in runs}
    order = np.random.default_rng(0)
    keys = list(runs)
    for i in range(repeats):
        for j in order.permutation(len(keys)):
            run = runs[keys[j]]
            began = time.perf_counter()
            run[1], sums = run[0](run[1], run[2], jnp.int32(i + 1))
            jax.block_until_ready(sums)
            times[keys[j]].append(time.perf_counter() - began)
    return {key: float(np.median(t)) for key, t in times.items()}


def _times(seconds: dict, name: str, settings: dict, field: str, ratios: str) -> dict:
    """``{field: {setting: seconds}, ratios: {<setting>_over_exact: ratio}}`` of config ``name``'s settings."""
    times = {key: seconds[name, key] for key in settings if (name, key) in seconds}
    reference = times.get("exact")
    return {
        field: times,
        ratios: {} if reference is None else {f"{k}_over_exact": t / reference for k, t in times.items()},
    }


def main(argv):
    del argv
    if _HUGE_PAGES.value:
        reexecute_with_huge_pages(["-m", "rfa.experiments.benchmarks.train_step", *sys.argv[1:]])
    settings, runs, decoders = {}, {}, {}
    for name in _CONFIGS.value:
        settings[name] = {}
        for config in training_configs(name, _DATA_DIR.value, _KINDS.value):
            setting = _setting(config)
            key = setting_name(**setting)
            began = time.perf_counter()
            runs[name, key] = list(compiled_step(config))
            decoder = compiled_decode(config, _DECODE_STEPS.value)
            if decoder is not None:
                decoders[name, key] = decoder
            settings[name][key] = {
                **setting,
                "task": config.task,
                "batch_size": config.batch_size,
                "max_length": config.max_length,
            }
            print(f"compiled {name} {key} in {time.perf_counter() - began:.1f} s", flush=True)
    began, load_before = time.perf_counter(), os.getloadavg()
    seconds = seconds_per_step(runs, _REPEATS.value)
    per_token = medians_in_turns(decoders, _REPEATS.value, per=_DECODE_STEPS.value)
    load_after = os.getloadavg()
    elapsed = time.perf_counter() - began
    print(f"timed {len(runs)} steps and {len(decoders)} decoders x {_REPEATS.value} rounds in {elapsed:.0f} s\n")
    configs = {}
    for name, named in settings.items():
        configs[name] = {"settings": named, **_times(seconds, name, named, "seconds_per_step", "ratios")}
        if any((name, key) in per_token for key in named):
            configs[name] |= _times(per_token, name, named, "seconds_per_token", "decode_ratios")
    data = {
        "model": "each setting of each study config, built as the study trains it: its task config, scale, m and depth",
        "environment": environment(),
        "repeats": _REPEATS.value,
        # the machine's 1-minute load average as the timing began and ended: other work shares the cores above 1
        "load_average": {"before": load_before[0], "after": load_after[0]},
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
        "configs": configs,
    }
    print(table(data), "\n")
    output = output_path(_OUTPUT.value, _WORKDIR.value, "benchmark_train_step.json")
    write_json(output, data)
    print(f"wrote {output}")
    warn_against_committed(output, data)


if __name__ == "__main__":
    run_main(main)
