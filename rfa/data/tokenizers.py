"""Tokenizers: UTF-8 bytes (text tasks, real TFDS text), a fixed word vocabulary (ListOps) and pixels (Pathfinder).

All reserve the same special ids, so every task pads with 0 and decodes from ``BOS_ID``:
``PAD_ID = 0`` (padding; the models mask it), ``BOS_ID = 1`` (first decoder input),
``EOS_ID = 2`` (end of a target).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
NUM_SPECIAL = 3


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class ByteTokenizer:
    """UTF-8 bytes as tokens: byte b is id ``b + 3``; vocabulary 259. No vocabulary file, no OOV.

    Example:
      >>> ByteTokenizer().encode("hi")
      array([107, 108], dtype=int32)
    """

    vocab_size = 256 + NUM_SPECIAL

    def encode(self, text: str | bytes) -> np.ndarray:
        data = text if isinstance(text, bytes) else str(text).encode("utf-8")
        return np.frombuffer(data, dtype=np.uint8).astype(np.int32) + NUM_SPECIAL

    def decode(self, ids: Sequence[int]) -> str:
        ids = np.asarray(ids)
        ids = ids[: np.argmax(ids == EOS_ID)] if (ids == EOS_ID).any() else ids
        return bytes(int(i) - NUM_SPECIAL for i in ids if i >= NUM_SPECIAL).decode("utf-8", errors="replace")


class WordTokenizer:
    """Whitespace-separated words of a fixed vocabulary; word i is id ``i + 3``.

    Example:
      >>> WordTokenizer(["a", "b"]).encode("b a")
      array([4, 3], dtype=int32)
    """

    def __init__(self, words: Sequence[str]):
        self.words = tuple(words)
        self._ids = {w: i + NUM_SPECIAL for i, w in enumerate(self.words)}
        self.vocab_size = len(self.words) + NUM_SPECIAL

    def encode(self, text: str | bytes) -> np.ndarray:
        words = _text(text).split()
        unknown = sorted({w for w in words if w not in self._ids})
        if unknown:
            raise ValueError(f"text has words outside the vocabulary {self.words}: {unknown}.")
        return np.array([self._ids[w] for w in words], dtype=np.int32)

    def decode(self, ids: Sequence[int]) -> str:
        words = []
        for i in np.asarray(ids):
            if i == EOS_ID:
                break
            if i >= NUM_SPECIAL:
                words.append(self.words[int(i) - NUM_SPECIAL])
        return " ".join(words)


class PixelTokenizer:
    """A uint8 image read in raster order (row by row), one token per pixel: intensity b is id ``b + 3``.

    Example:
      >>> PixelTokenizer().encode(np.array([[0, 255], [7, 1]], np.uint8))
      array([  3, 258,  10,   4], dtype=int32)
    """

    vocab_size = 256 + NUM_SPECIAL

    def encode(self, image: np.ndarray) -> np.ndarray:
        image = np.asarray(image)
        if image.dtype != np.uint8:
            raise TypeError(f"PixelTokenizer encodes uint8 images, got dtype {image.dtype}.")
        return image.reshape(-1).astype(np.int32) + NUM_SPECIAL

    def decode(self, ids: Sequence[int]) -> np.ndarray:
        """The pixels of ``ids`` (special ids left out) as a flat uint8 array."""
        ids = np.asarray(ids)
        return (ids[ids >= NUM_SPECIAL] - NUM_SPECIAL).astype(np.uint8)
