"""A character-level language-modelling corpus on every machine: the Python standard library's source.

``tfds.data_source("python_source", data_dir=...)`` has one example per ``.py`` file of the
running interpreter's standard library (test packages and site-packages left out), as
``{"path": "json/decoder.py", "text": "..."}``. A file belongs to the ``validation``
split when ``crc32(path) % 10 == 0`` and to ``test`` when it is 1 (about a tenth each), so the splits are
stable across machines;
the text itself is that of the Python version that prepared the data (3.11: 734 files, 12 MB).
Language modelling reads the split as one byte stream cut into windows, as for enwik8.
"""

from __future__ import annotations

import pathlib
import sys
import sysconfig
import zlib
from typing import ClassVar

import tensorflow_datasets as tfds

from rfa.data.generated import PreparedLocally

SKIPPED_DIRECTORIES = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


def source_files(root: pathlib.Path) -> list[pathlib.Path]:
    """The library's ``.py`` files under ``root`` in sorted order, tests and third-party packages left out."""
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(part in SKIPPED_DIRECTORIES or part.startswith("test_") for part in path.relative_to(root).parts)
    )


def split_of(relative_path: str) -> str:
    """The split of a file, from the CRC32 of its path relative to the library.

    Example:
      >>> split_of("json/decoder.py")
      'train'
    """
    return {0: "validation", 1: "test"}.get(zlib.crc32(relative_path.encode()) % 10, "train")


class PythonSource(PreparedLocally, tfds.core.GeneratorBasedBuilder):
    """The standard library's Python source, split by file into train, validation and test."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        "1.0.0": "Initial release.",
        "1.1.0": "A test split (crc32(path) % 10 == 1) taken from train.",
    }

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=f"{__doc__}\nPrepared from Python {sys.version.split()[0]}.",
            features=tfds.features.FeaturesDict({"path": tfds.features.Text(), "text": tfds.features.Text()}),
        )

    def _split_generators(self, dl_manager):
        root = pathlib.Path(sysconfig.get_paths()["stdlib"])
        return {split: self._generate_examples(root, split) for split in ("train", "validation", "test")}

    def _generate_examples(self, root: pathlib.Path, split: str):
        for path in source_files(root):
            relative = path.relative_to(root).as_posix()
            if split_of(relative) == split:
                yield relative, {"path": relative, "text": path.read_text(encoding="utf-8", errors="replace")}
