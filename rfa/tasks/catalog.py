"""The shipped tasks: the project's own datasets and a few real TFDS ones, each registered by name.

The project's own datasets are prepared on first use, except the Long Range Arena ones at their real
sizes, which take minutes and are prepared once by ``rfa prepare-data``; each of those
has a ``_sample`` task with the same examples in small splits, prepared on first use (quick runs and
tests). Real TFDS datasets must already be prepared (``array_record``) in the data_dir. Register your own
with :func:`rfa.tasks.register_task`.
"""

from __future__ import annotations

from rfa.data import digits, listops
from rfa.data.tokenizers import ByteTokenizer, PixelTokenizer, WordTokenizer
from rfa.tasks.base import Task, register_task

_BYTES = ByteTokenizer()
_LISTOPS = WordTokenizer(listops.VOCABULARY)
_PIXELS = PixelTokenizer()
_HELD_OUT_TENTH = {"train_split": "train[:90%]", "validation_split": "train[90%:]"}

SHIPPED: dict[str, Task] = {
    **{
        name: Task(f"algorithmic/{name}", "seq2seq", "inputs", "targets", _BYTES, generated=True)
        for name in ("copy", "reverse", "sort")
    },
    # Sort on strings of 33-64 letters, beyond the 2-32 of "sort": evaluated by
    # rfa/configs/studies/length_generalization.py
    # (the builder also has copy_longer and reverse_longer, to register the same way).
    "sort_longer": Task("algorithmic/sort_longer", "seq2seq", "inputs", "targets", _BYTES, generated=True),
    "listops": Task("listops/short", "classification", "source", "label", _LISTOPS, num_classes=10, generated=True),
    "listops_cpu": Task("listops/cpu", "classification", "source", "label", _LISTOPS, num_classes=10, generated=True),
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
    "pathfinder_cpu": Task(
        "pathfinder/cpu", "classification", "image", "label", _PIXELS, num_classes=2, generated=True
    ),
    # Time series that ship in statsmodels: forecast the next steps from a lookback window.
    "co2": Task("series/co2", "forecast", "values", None, None, generated=True, season=52),
    "sunspots": Task("series/sunspots", "forecast", "values", None, None, generated=True, season=11),
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
    # Multi-query associative recall at the sizes of config.recall and config.max_length (rfa.data.mqar).
    "mqar": Task("mqar", "recall", "inputs", "targets", None, generated=True),
    "python_source": Task("python_source", "lm", "text", None, _BYTES, generated=True),
    # Images that ship inside packages (scikit-learn's handwritten digits).
    "digits": Task(
        "digits",
        "image_classification",
        "image",
        "label",
        None,
        num_classes=10,
        generated=True,
        image_shape=(8, 8, 1),
        pixel_max=float(digits.MAX_INTENSITY),
    ),
    # TFDS datasets without a validation split: the last tenth of train validates.
    "imdb_reviews": Task("imdb_reviews", "classification", "text", "label", _BYTES, num_classes=2, **_HELD_OUT_TENTH),
    "lm1b": Task("lm1b", "lm", "text", None, _BYTES, **_HELD_OUT_TENTH),
    "wmt14_de_en": Task("wmt14_translate/de-en", "seq2seq", "de", "en", _BYTES),
    "ted_pt_en": Task("ted_hrlr_translate/pt_to_en", "seq2seq", "pt", "en", _BYTES),
}

for _name, _task in SHIPPED.items():
    register_task(_name, _task)
