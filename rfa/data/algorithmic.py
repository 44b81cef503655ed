"""Sequence-to-sequence algorithmic tasks: copy, reverse and sort strings of random letters.

A TFDS ``GeneratorBasedBuilder`` (``tfds.data_source("algorithmic/sort", data_dir=...)``) whose
examples are ``{"inputs": "dbca", "targets": "abcd"}``: ``inputs`` has a length drawn uniformly
from ``[min_length, max_length]`` over the first ``num_symbols`` lowercase letters. Everything is
generated from fixed seeds, so the same config gives the same files on every machine.
These are the classic probes of whether attention can route information by position (copy,
reverse) and by content (sort); see Tay et al., "Long Range Arena", ICLR 2021, for their use
in efficient-attention comparisons. Each task also has a ``<task>_longer`` config, strings of 33-64 letters
(longer than any the default config trains on, small splits): the probe of length generalization.
"""

from __future__ import annotations

import dataclasses
import string
import zlib
from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds

from rfa.data.generated import GeneratedBuilder, GeneratedConfig

TRANSFORMS = {"copy": lambda s: s, "reverse": lambda s: s[::-1], "sort": lambda s: "".join(sorted(s))}


@dataclasses.dataclass
class AlgorithmicConfig(GeneratedConfig):
    """One task and its sizes."""

    num_symbols: int = 16
    min_length: int = 2
    max_length: int = 32


class Algorithmic(GeneratedBuilder):
    """Copy, reverse and sort: ``tfds.data_source("algorithmic/<task>")``; splits train/validation/test."""

    BUILDER_CONFIGS: ClassVar[list] = [
        AlgorithmicConfig(name=task, description=f"{task} a string of letters") for task in TRANSFORMS
    ] + [
        AlgorithmicConfig(
            name=f"{task}_longer",
            description=f"{task} a string longer than the training ones",
            min_length=33,
            max_length=64,
            num_train=1_000,
        )
        for task in TRANSFORMS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({"inputs": tfds.features.Text(), "targets": tfds.features.Text()}),
            supervised_keys=("inputs", "targets"),
        )

    def _generate_examples(self, split: str, count: int):
        """Yields ``(key, {"inputs", "targets"})`` for ``count`` strings, seeded by task and split."""
        config = self.builder_config
        rng = np.random.default_rng([zlib.crc32(config.name.encode()), zlib.crc32(split.encode())])
        letters = np.array(list(string.ascii_lowercase[: config.num_symbols]))
        for index in range(count):
            text = "".join(rng.choice(letters, size=rng.integers(config.min_length, config.max_length + 1)))
            yield index, {"inputs": text, "targets": TRANSFORMS[config.name.removesuffix("_longer")](text)}
