"""The base of the project's generated datasets: quiet preparation, train/validation/test splits of configured sizes."""

from __future__ import annotations

import dataclasses
import sys
from typing import ClassVar

import tensorflow_datasets as tfds


@dataclasses.dataclass
class GeneratedConfig(tfds.core.BuilderConfig):
    """Split sizes: ``num_train`` training examples, ``num_eval`` in each of validation and test."""

    num_train: int = 20_000
    num_eval: int = 1_000


class PreparedLocally:
    """Mixin of the project's TFDS builders: preparing one prints a single line on stderr.

    TFDS's ``download_and_prepare`` reports a download on stdout ("Downloading and preparing
    dataset Unknown size ...", then "... downloaded and prepared") and draws a progress bar per
    split and per shuffle pass; for data generated on this machine none of it says anything, and
    stdout is where ``rfa.experiments.train`` prints its results. Errors still raise as usual.

    Example:
      >>> class MyData(PreparedLocally, tfds.core.GeneratorBasedBuilder): ...
    """

    def download_and_prepare(self, **kwargs) -> None:
        """TFDS's ``download_and_prepare`` with its progress bars off (they are on again afterwards)."""
        tfds.display_progress_bar(False)
        try:
            super().download_and_prepare(**kwargs)
        finally:
            tfds.display_progress_bar(True)

    def _log_download_bytes(self) -> None:
        print(
            f"Preparing {self.info.full_name} in {self.data_dir_root} (first use: generated here, nothing to download)",
            file=sys.stderr,
            flush=True,
        )

    def _log_download_done(self) -> None:
        """Says nothing: the line printed before preparation named the dataset and where it goes."""


class GeneratedBuilder(PreparedLocally, tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Splits ``train`` / ``validation`` / ``test`` from ``_generate_examples(split, count)``, seeded per split."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {"1.0.0": "Initial release."}

    def _split_generators(self, dl_manager):
        config = self.builder_config
        counts = {"train": config.num_train, "validation": config.num_eval, "test": config.num_eval}
        return {split: self._generate_examples(split, count) for split, count in counts.items()}
