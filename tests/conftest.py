"""Session set-up: a persistent XLA compilation cache and fast compilation, for this process and its subprocesses.

The suite runs thousands of small programs, so compiling them is most of its time:

- **A persistent compilation cache**, in ``.cache/xla-tests/`` of the checkout (ignored by git; empty in a fresh
  clone), or in ``$RFA_TEST_XLA_CACHE`` (``off`` turns it off), in a folder keyed by the installed jax and jaxlib
  versions. The entry-point tests start ``rfa ...`` subprocesses that compile the programs the in-process tests
  (or their own earlier launches: a killed and resumed run, the two processes of a multi-process run) already
  compiled; through the cache they skip it (the subprocess tests of tests/train/test_train.py: 107 s without,
  71 s with). Programs that compile in under 0.1 s are not written: reading them back would not pay. XLA keys
  every entry by the program and the compiler flags, so a stale entry is never used; the version in the folder
  name lets old ones be deleted by hand. (In 0.3's first fresh-clone runs a worker segfaulted inside a cache write;
  that was the limit of memory maps below, since handled, not the cache. JAX writes an entry without a lock, so a
  process may read one half written: JAX then warns and compiles.)
- **Flags that make XLA:CPU compile faster** (``XLA_FLAGS``, ``COMPILE_FASTER`` below): backend optimisation level 0
  (about 1.6x faster on these tiny shapes); the older loop emitters instead of the fusion emitters, which halve the
  time of a small program's compilation (22 to 12 ms for an eager op, 7 to 3 s for four cases of
  tests/attention/test_against_references.py); one LLVM module per program, the plain instruction scheduler, and
  LLVM without its expensive passes (what ``jax_disable_most_optimizations`` sets; 8 to 15% less CPU on three model
  and delta-rule files).
  Measured on five in-process files (292 tests, 2 workers, cache off, nothing else running): 231 s with level 0
  alone, 132 s with all four; compilation fell from 69% of their time to 48%. The suite checks values, not speed:
  the numbers agree, a model trained in a notebook reaches the same accuracy, and benchmarks and users keep XLA's
  defaults. A flag already in ``XLA_FLAGS`` is kept as set. XLA aborts on a flag it does not know, so a jaxlib that
  refuses them (asked once, in a subprocess) gets level 0 alone.

Set before JAX is imported, as JAX reads these at import.
"""

import importlib.metadata
import os
import subprocess
import sys

_VERSIONS = "-".join(
    [
        f"jax{importlib.metadata.version('jax')}",
        f"jaxlib{importlib.metadata.version('jaxlib')}",
        f"py{sys.version_info.major}{sys.version_info.minor}",
    ]
)
_CACHE = os.environ.get("RFA_TEST_XLA_CACHE", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache"))
if _CACHE != "off":
    _CACHE = os.path.join(_CACHE, "xla-tests", _VERSIONS)
    os.makedirs(_CACHE, exist_ok=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.1"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
COMPILE_FASTER = {
    "xla_backend_optimization_level": "0",
    "xla_cpu_use_fusion_emitters": "false",
    "xla_cpu_parallel_codegen_split_count": "1",
    "xla_cpu_enable_concurrency_optimized_scheduler": "false",
    "xla_llvm_disable_expensive_passes": "true",
}


def _xla_accepts(flags: str) -> bool:
    """Whether this jaxlib starts with ``flags``: XLA aborts the process on a flag it does not know, and a later
    jaxlib may drop one of these. Asked once per jax version when the cache is on (the answer is kept there)."""
    answer = os.path.join(_CACHE, "xla-flags-accepted") if _CACHE != "off" else None
    if answer and os.path.exists(answer):
        with open(answer) as f:
            if f.read() == flags:
                return True
    probe = [sys.executable, "-c", "import jax; jax.devices()"]
    accepted = subprocess.run(probe, env={**os.environ, "XLA_FLAGS": flags}, capture_output=True).returncode == 0
    if accepted and answer:
        with open(answer, "w") as f:
            f.write(flags)
    return accepted


_flags = os.environ.get("XLA_FLAGS", "")
_missing = [f"--{name}={value}" for name, value in COMPILE_FASTER.items() if f"--{name}" not in _flags]
if _missing:  # this process starts the suite (its workers and subprocesses inherit the result)
    _faster = " ".join([_flags, *_missing]).strip()
    _level_0 = " ".join([_flags, *(f for f in _missing if "optimization_level" in f)]).strip()  # every jaxlib has it
    os.environ["XLA_FLAGS"] = _faster if _xla_accepts(_faster) else _level_0


import gc  # noqa: E402
import pathlib  # noqa: E402

import pytest  # noqa: E402  (after the settings above, which must precede any JAX import)

# XLA:CPU maps the code of every program it compiles into memory, and JAX keeps every compiled program: a worker
# that runs a few hundred tests passes Linux's limit of memory maps per process (vm.max_map_count, 65530 by
# default; 46 attention tests leave about 9,700), and the next compilation segfaults inside XLA
# (backend_compile_and_load). Fresh-clone runs lost workers that way, after which pytest-xdist hung. When a worker
# holds more than half of its limit, the compiled programs are dropped; the tests after it compile what they use.
_MAP_LIMIT = pathlib.Path("/proc/sys/vm/max_map_count")
_MAPS = pathlib.Path("/proc/self/maps")
MAX_MAPS = int(_MAP_LIMIT.read_text()) if _MAP_LIMIT.exists() else None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if MAX_MAPS is not None and _MAPS.read_bytes().count(b"\n") > MAX_MAPS // 2:
        import jax

        jax.clear_caches()
        gc.collect()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """A TFDS data_dir shared by the session: the project's datasets are prepared into it once."""
    return str(tmp_path_factory.mktemp("tfds"))


# The files that take longest, first: pytest-xdist hands out whole files in collection order, so a
# long file collected last (tests/train/ sorts last) would run alone at the end on one worker. Longest first
# evens the two workers' totals (a full run's junit replayed through loadfile's hand-out: 905 and 813 s in
# collection order, 859 and 859 longest first).
LONGEST_FIRST = (  # measured: a full run's per-file seconds (junit), descending
    "test_docs.py",
    "train/test_train.py",
    "experiments/test_runner.py",
    "models/test_models.py",
    "attention/test_against_references.py",
    "test_doctests.py",
    "train/test_multiprocess.py",
    "models/test_delta_window_hybrid.py",
    "test_packaging.py",
    "experiments/test_benchmark_smoke.py",
    "test_notebooks.py",
    "attention/test_packed_sequences.py",
    "data/test_long_range_arena.py",
    "attention/test_state_layers.py",
    "models/test_float64.py",
    "random_features/test_theory.py",
    "models/test_attention_kinds.py",
    "train/test_sequence_sharded_training.py",
    "train/test_commands.py",
    "experiments/test_estimators_in_models.py",
    "attention/test_sequence_parallel.py",
    "test_readme.py",
    "attention/test_kernelized.py",
)


_MISSING = [name for name in LONGEST_FIRST if not (pathlib.Path(__file__).parent / name).is_file()]
if _MISSING:  # a moved file would silently lose its place (tests/experiments/test_runner.py did, in 0.3)
    raise pytest.UsageError(f"tests/conftest.py's LONGEST_FIRST names files that do not exist: {_MISSING}")


def pytest_collection_modifyitems(items):
    def rank(item):
        path = item.path.as_posix()
        return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(f"tests/{name}")), len(LONGEST_FIRST))

    items.sort(key=rank)
