"""Handwritten digits: scikit-learn's bundled 1,797 images of 8×8 pixels (intensities 0-16), classes 0-9.

The UCI "Optical Recognition of Handwritten Digits" test set as scikit-learn ships it
(``sklearn.datasets.load_digits``, no download). The builder writes it as a TFDS dataset with a
deterministic, class-stratified split: in each class, a fixed permutation puts 70% of the images in
``train``, 15% in ``validation`` and 15% in ``test`` (1,258 / 270 / 269 images).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds

from rfa.data.generated import PreparedLocally

SPLITS = {"train": 0.70, "validation": 0.15, "test": 0.15}
MAX_INTENSITY = 16


def split_indices(labels: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """Per class, a permutation of its indices cut 70 / 15 / 15: ``{split: sorted indices}``.

    Example:
      >>> parts = split_indices(np.repeat(np.arange(10), 20))
      >>> [len(parts[name]) for name in ("train", "validation", "test")]
      [140, 30, 30]
    """
    rng = np.random.default_rng(seed)
    parts = {name: [] for name in SPLITS}
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        cuts = np.round(np.cumsum([SPLITS["train"], SPLITS["validation"]]) * len(members)).astype(int)
        for name, chunk in zip(SPLITS, np.split(members, cuts), strict=True):
            parts[name].append(chunk)
    return {name: np.sort(np.concatenate(chunks)) for name, chunks in parts.items()}


class Digits(PreparedLocally, tfds.core.GeneratorBasedBuilder):
    """``tfds.data_source("digits")``: ``image [8, 8, 1]`` uint8 in 0-16, ``label`` 0-9 and the source ``index``."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {"1.0.0": "Initial release."}

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Tensor(shape=(8, 8, 1), dtype=np.uint8),
                    "label": tfds.features.ClassLabel(num_classes=10),
                    "index": np.int64,  # the image's row in sklearn.datasets.load_digits()
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        from sklearn.datasets import load_digits  # imported when preparing only: scikit-learn is slow to import

        digits = load_digits()
        images = digits.images.astype(np.uint8)[..., None]
        parts = split_indices(digits.target)
        return {name: self._generate_examples(images, digits.target, index) for name, index in parts.items()}

    def _generate_examples(self, images: np.ndarray, labels: np.ndarray, rows: np.ndarray):
        for row in rows:
            yield int(row), {"image": images[row], "label": int(labels[row]), "index": int(row)}
