"""The base of the project's generated datasets: train/validation/test splits of configured sizes."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import tensorflow_datasets as tfds


@dataclasses.dataclass
class GeneratedConfig(tfds.core.BuilderConfig):
    """Split sizes: ``num_train`` training examples, ``num_eval`` in each of validation and test."""

    num_train: int = 20_000
    num_eval: int = 1_000


class GeneratedBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Splits ``train`` / ``validation`` / ``test`` from ``_generate_examples(split, count)``, seeded per split."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {"1.0.0": "Initial release."}

    def _split_generators(self, dl_manager):
        config = self.builder_config
        counts = {"train": config.num_train, "validation": config.num_eval, "test": config.num_eval}
        return {split: self._generate_examples(split, count) for split, count in counts.items()}
