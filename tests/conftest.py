"""Session set-up: a persistent XLA compilation cache shared by this process and its subprocesses.

The entry-point tests start ``python -m experiments...`` subprocesses that compile the same programs
as the in-process tests; through the cache (a fresh temporary directory per session, removed at
exit) they skip most compilation. Set before JAX is imported, as JAX reads these at import.
"""

import atexit
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="rfa-test-xla-cache-")
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


import pytest  # noqa: E402  (after the cache settings above, which must precede any JAX import)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """A TFDS data_dir shared by the session: the project's datasets are prepared into it once."""
    return str(tmp_path_factory.mktemp("tfds"))
