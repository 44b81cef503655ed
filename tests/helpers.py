"""Shared helpers for the test suite (``tests/`` is on pytest's pythonpath)."""

import contextlib
import json
import math
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest


def tiered(values, fast, ids=None) -> list:
    """``values`` as pytest parameters, those not in ``fast`` marked slow: the fast tier (``make test-fast``) runs
    a representative of each axis of a matrix, the full suite every cell. A tuple value is several arguments."""
    return [
        pytest.param(
            *(value if isinstance(value, tuple) else (value,)),
            id=None if ids is None else ids[i],
            marks=() if value in fast else pytest.mark.slow,
        )
        for i, value in enumerate(values)
    ]


def normal(seed: int, shape, scale: float = 1.0, dtype=np.float32):
    """A reproducible standard-normal array (NumPy RNG, independent of JAX's)."""
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def monte_carlo(estimate, num_draws: int, seed: int = 0, batch: int = 5000):
    """Evaluates ``estimate(key)`` for ``num_draws`` independent keys, jitted and vmapped in batches."""
    keys = jax.random.split(jax.random.key(seed), num_draws)
    fn = jax.jit(jax.vmap(estimate))
    return np.concatenate([np.asarray(fn(keys[i : i + batch]), np.float64) for i in range(0, num_draws, batch)])


def assert_within(sample, value, what: str, num_se: float = 4.0) -> None:
    """The mean of a Monte Carlo ``sample`` is within ``num_se`` standard errors of ``value``."""
    se = sample.std() / math.sqrt(len(sample))
    assert abs(sample.mean() - value) < num_se * se, f"{what}: Monte Carlo {sample.mean()} vs {value} (se {se})"


def non_progress_lines(output: str, desc: str) -> list[str]:
    """The non-empty lines of a command's output that are not whole tqdm bars labelled ``desc``.

    A bar redraws itself after ``\\r``; a log record printed in the middle of one shares its line,
    so a line counts as a bar only if it is nothing else.
    """
    bar = re.compile(rf"{re.escape(desc)}: +\d+%\|[^|]*\| \d+/\d+ \[[^\]]*\]")
    return [line for line in re.split(r"[\r\n]+", output) if line.strip() and not bar.fullmatch(line)]


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_on_devices(script: str, *args: str, devices: int = 8) -> dict:
    """Runs ``script`` in a Python subprocess with ``devices`` CPU devices; the JSON of its last stdout line.

    JAX fixes its device count at start-up, so tests of sharded programs run apart from the suite's
    one-device process (``--xla_force_host_platform_device_count``); the repository is on its path.
    """
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_TWO_CPUS = """import os
if hasattr(os, "sched_setaffinity"):  # two CPUs, before XLA sizes its thread pool from them
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
"""


def run_as_users_do(script: str, *, timeout: float, what: str) -> str:
    """Runs ``script`` in a fresh Python on two CPUs with XLA's default flags; its stdout, or a failure saying that
    ``what`` did not finish within ``timeout`` seconds (with the lines it printed).

    For hangs of XLA:CPU's thread pool, which the suite cannot see in-process: its compile flags
    (conftest.COMPILE_FASTER) change XLA's scheduling, and hid two deadlocks that users and the studies met. Two
    CPUs, so that a many-core machine (a larger pool) tests what this project's 2-core machine does."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT, "XLA_FLAGS": ""}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TWO_CPUS + script], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as expired:
        printed = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        pytest.fail(f"{what} did not finish in {timeout} s; it printed: {printed!r}")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def run_module(*args, **kwargs) -> subprocess.CompletedProcess:
    """``python -m <args>`` from the checkout's root, its output captured as text."""
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, **kwargs)


_IN_TURN = r"""
import importlib.util, json, os, runpy, sys
from absl import flags
end = sys.argv[2]
for module, *args in json.loads(sys.argv[1]):
    sys.argv = [module, *args]  # runpy sets sys.argv[0] to the module's file while it runs
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)  # what python -m MODULE ARGS runs
        status = 0
    except SystemExit as exit_:  # as the interpreter ends on one: a message goes to stderr, with status 1
        status = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        print(f"\n{end} {status}", file=stream, flush=True)
    # the command's own flags (registered under its file, as __main__'s are: a package's __main__.py) go, with the
    # overrides of a config flag (--config.task, registered as they are parsed): the next command defines its own
    spec = importlib.util.find_spec(module)
    main = os.path.join(os.path.dirname(spec.origin), "__main__.py") if spec.submodule_search_locations else spec.origin
    own = {flag.name for flag in flags.FLAGS.flags_by_module_dict().get(main, [])}
    for name in [name for name in flags.FLAGS if name in own or name.split(".")[0] in own]:
        delattr(flags.FLAGS, name)
"""
_END = "rfa-tests: the command ended with status"


def run_in_turn(commands: list[list[str]], **kwargs) -> list[subprocess.CompletedProcess]:
    """Runs each ``[module, *flags]`` of ``commands`` as ``python -m module *flags`` would (``runpy``, ``__main__``,
    its own ``sys.argv`` and flags), in turn in one subprocess from the checkout's root: separate subprocesses would
    pay Python's, JAX's and rfa's start-up each, about 4 s of CPU. Each command's exit status, stdout and stderr, in
    order. An exception that is not ``SystemExit`` ends the subprocess there and fails the test with its traceback."""
    done = subprocess.run(
        [sys.executable, "-c", _IN_TURN, json.dumps(commands), _END],
        cwd=ROOT,
        capture_output=True,
        text=True,
        **kwargs,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    outs, errs = (re.split(rf"\n{_END} (-?\d+)\n", text)[:-1] for text in (done.stdout, done.stderr))
    assert len(outs) == len(errs) == 2 * len(commands), done.stderr[-6000:]
    return [
        subprocess.CompletedProcess([sys.executable, "-m", *command], int(status), out, err)
        for command, out, err, status in zip(commands, outs[::2], errs[::2], errs[1::2], strict=True)
    ]


def lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` (progress bars' carriage returns split lines too)."""
    return [line for line in re.split(r"[\r\n]+", text) if line.strip()]


@contextlib.contextmanager
def own_estimators():
    """Estimators registered inside are forgotten after: a README or how-to block registers its own (``antithetic``),
    and another block in the same test process registers the same name again."""
    from rfa.random_features import feature_maps

    saved = dict(feature_maps._REGISTRY)
    try:
        yield
    finally:
        feature_maps._REGISTRY.clear()
        feature_maps._REGISTRY.update(saved)


@contextlib.contextmanager
def own_kinds():
    """Attention kinds and variants registered inside are forgotten after (a test's user module registers its own)."""
    from rfa.layers import kinds

    saved = dict(kinds._KINDS), dict(kinds._VARIANTS)
    try:
        yield
    finally:
        for table, before in zip((kinds._KINDS, kinds._VARIANTS), saved, strict=True):
            table.clear()
            table.update(before)


def holm_reference(p) -> list[bool]:
    """statsmodels' Holm rejections at α = 0.05, the independent reference of the tables' verdicts. Its Holm branch
    calls ``gc.collect()`` on every call: in a worker that has run hundreds of tests (a heap of compiled programs)
    that took 3 to 5 s a call, 0.06 s alone; the reference runs with that collection skipped (it frees nothing the
    answer depends on)."""
    from unittest import mock

    from statsmodels.stats.multitest import multipletests

    with mock.patch("gc.collect", lambda *args: 0):
        return [bool(reject) for reject in multipletests(np.asarray(p, np.float64), alpha=0.05, method="holm")[0]]
