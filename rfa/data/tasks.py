"""Training tasks by name: which TFDS dataset, which features, which tokenizer, which model kind.

A task is ``kind`` (``"seq2seq"`` for the encoder-decoder, ``"classification"`` for the encoder
classifier, ``"lm"`` for the decoder-only language model, ``"image_classification"`` for the vision
models, ``"forecast"`` for the forecaster) plus where its inputs come from. The
project's own datasets are prepared on first use, except the Long Range Arena ones at their real
sizes, which take minutes and are prepared once by ``python -m experiments.prepare_data``; each of
those has a ``_sample`` task with the same examples in small splits, prepared on first use (quick
runs and tests). Real TFDS datasets must already be prepared (``array_record``) in the data_dir.
Add a task by adding an entry to ``TASKS``.
"""

from __future__ import annotations

import dataclasses

from rfa.data import digits, listops
from rfa.data.tokenizers import ByteTokenizer, PixelTokenizer, WordTokenizer

KINDS = ("seq2seq", "classification", "lm", "image_classification", "forecast")


@dataclasses.dataclass(frozen=True)
class Task:
    """A task's data and shape.

    Attributes:
      dataset: TFDS name with config, e.g. ``"algorithmic/sort"``.
      kind: ``"seq2seq"``, ``"classification"``, ``"lm"``, ``"image_classification"`` or ``"forecast"``.
      inputs: feature holding the input (the source, the text or image to classify, the LM text).
      targets: the target text (seq2seq) or the integer label (classification); None for lm.
      tokenizer: text <-> ids, special ids as in ``rfa.data.tokenizers``; None for images read as pixels.
      num_classes: labels of a classification task.
      generated: True for the project's own builders.
      prepare_on_first_use: a generated dataset is prepared by the first run that needs it; False for
        those that take minutes (``python -m experiments.prepare_data`` prepares them).
      train_split, eval_split: TFDS split names.
      image_shape: ``(height, width, channels)`` of an image task's pixels.
      pixel_max: an image task's largest intensity: the pipeline divides by it, so pixels are in [0, 1].
      season: a forecasting task's season in steps (its seasonal-naive baseline repeats the last one).
      channels: a forecasting task's variables.
    """

    dataset: str
    kind: str
    inputs: str
    targets: str | None
    tokenizer: ByteTokenizer | WordTokenizer | PixelTokenizer | None
    num_classes: int = 0
    generated: bool = False
    prepare_on_first_use: bool = True
    train_split: str = "train"
    eval_split: str = "validation"
    image_shape: tuple[int, int, int] | None = None
    pixel_max: float = 255.0
    season: int = 1
    channels: int = 1

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Task.kind must be one of {KINDS}, got {self.kind!r}.")
        if (self.kind == "image_classification") != (self.image_shape is not None):
            raise ValueError("an image_classification task has an image_shape, and only such a task.")
        if (self.kind in ("image_classification", "forecast")) != (self.tokenizer is None):
            raise ValueError(
                "image and forecasting tasks read numbers, not tokens: they, and only they, have no tokenizer."
            )

    @property
    def vocab_size(self) -> int:
        return 0 if self.tokenizer is None else self.tokenizer.vocab_size


_BYTES = ByteTokenizer()
_LISTOPS = WordTokenizer(listops.VOCABULARY)
_PIXELS = PixelTokenizer()

TASKS: dict[str, Task] = {
    **{
        name: Task(f"algorithmic/{name}", "seq2seq", "inputs", "targets", _BYTES, generated=True)
        for name in ("copy", "reverse", "sort")
    },
    "listops": Task("listops/short", "classification", "source", "label", _LISTOPS, num_classes=10, generated=True),
    # Long Range Arena at its real lengths: ListOps up to 2000 tokens, Pathfinder-32 as 1024 pixels.
    "listops_lra": Task(
        "listops/lra",
        "classification",
        "source",
        "label",
        _LISTOPS,
        num_classes=10,
        generated=True,
        prepare_on_first_use=False,
    ),
    "listops_lra_sample": Task(
        "listops/lra_sample", "classification", "source", "label", _LISTOPS, num_classes=10, generated=True
    ),
    "pathfinder32": Task(
        "pathfinder/32",
        "classification",
        "image",
        "label",
        _PIXELS,
        num_classes=2,
        generated=True,
        prepare_on_first_use=False,
    ),
    "pathfinder32_sample": Task(
        "pathfinder/32_sample", "classification", "image", "label", _PIXELS, num_classes=2, generated=True
    ),
    # Time series that ship in statsmodels: forecast the next steps from a lookback window.
    "co2": Task("series/co2", "forecast", "values", None, None, generated=True, eval_split="test", season=52),
    "sunspots": Task("series/sunspots", "forecast", "values", None, None, generated=True, eval_split="test", season=11),
    # Pathfinder's images as images (the vision models' input) rather than pixel tokens.
    "pathfinder32_image": Task(
        "pathfinder/32",
        "image_classification",
        "image",
        "label",
        None,
        num_classes=2,
        generated=True,
        prepare_on_first_use=False,
        image_shape=(32, 32, 1),
    ),
    "pathfinder32_image_sample": Task(
        "pathfinder/32_sample",
        "image_classification",
        "image",
        "label",
        None,
        num_classes=2,
        generated=True,
        image_shape=(32, 32, 1),
    ),
    "python_source": Task("python_source", "lm", "text", None, _BYTES, generated=True),
    # Images that ship inside packages (scikit-learn's handwritten digits), evaluated on the test split.
    "digits": Task(
        "digits",
        "image_classification",
        "image",
        "label",
        None,
        num_classes=10,
        generated=True,
        eval_split="test",
        image_shape=(8, 8, 1),
        pixel_max=float(digits.MAX_INTENSITY),
    ),
    "imdb_reviews": Task("imdb_reviews", "classification", "text", "label", _BYTES, num_classes=2, eval_split="test"),
    "lm1b": Task("lm1b", "lm", "text", None, _BYTES, eval_split="test"),
    "wmt14_de_en": Task("wmt14_translate/de-en", "seq2seq", "de", "en", _BYTES),
    "ted_pt_en": Task("ted_hrlr_translate/pt_to_en", "seq2seq", "pt", "en", _BYTES),
}


def get_task(name: str) -> Task:
    """The task called ``name`` (a key of ``TASKS``); a clear error for an unknown name."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}.")
    return TASKS[name]
