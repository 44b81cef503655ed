"""Session set-up: a persistent XLA compilation cache and fast compilation, for this process and its subprocesses.

The suite runs thousands of small programs, so compiling them is most of its time:

- **A persistent compilation cache**, opt-in: with ``$RFA_TEST_XLA_CACHE`` set, in a folder of it keyed by the
  installed jax and jaxlib versions. Off by default since two fresh-clone runs (jax 0.10.2) each lost a worker to
  a segfault inside the cache write (``put_executable_and_time``, compiling the attention-error sweep of
  tests/experiments/test_measure.py), after which pytest-xdist hung. The entry-point tests start
  ``rfa ...`` subprocesses that compile the programs the in-process tests already
  compiled, and pytest-xdist workers and later runs (e.g. ``tools/mutants.py``) compile the same
  programs again; through the cache they skip it. XLA keys every entry by the program and the
  compiler flags, so a stale entry is never used; the version in the folder name lets old ones be
  deleted by hand.
- **XLA's backend optimisation level 0** (``XLA_FLAGS``), which compiles about 1.6x faster on these
  tiny shapes. The suite checks values, not speed; benchmarks and users keep XLA's default.
  Flags already in ``XLA_FLAGS`` are kept.

Set before JAX is imported, as JAX reads these at import.
"""

import importlib.metadata
import os
import sys

_VERSIONS = "-".join(
    [
        f"jax{importlib.metadata.version('jax')}",
        f"jaxlib{importlib.metadata.version('jaxlib')}",
        f"py{sys.version_info.major}{sys.version_info.minor}",
    ]
)
_CACHE = os.environ.get("RFA_TEST_XLA_CACHE")
if _CACHE:  # opt-in: writing the cache segfaulted a worker in 2 of 3 fresh-clone runs (jax 0.10.2), see below
    _CACHE = os.path.join(_CACHE, _VERSIONS)
    os.makedirs(_CACHE, exist_ok=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()


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
# long file collected last (tests/train/ sorts last) would run alone at the end on one worker.
LONGEST_FIRST = (
    "train/test_train.py",
    "rfa/experiments/test_runner.py",
    "models/test_models.py",
    "test_readme.py",
    "test_doctests.py",
    "test_notebooks.py",
    "attention/test_kernelized.py",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        path = item.path.as_posix()
        return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(f"tests/{name}")), len(LONGEST_FIRST))

    items.sort(key=rank)
