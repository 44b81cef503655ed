"""What a task kind is, the registry of kinds, and the named tasks (a dataset with a kind).

A task kind (seq2seq, lm, classification, image classification, forecasting, or your own) is one
:class:`TaskKind` registered under its name: it owns everything that differs between kinds, from the
examples of a split to the metrics and what its model answers. The training pipeline, steps, loop and
config read only this interface, so a new kind is one module that registers one object
(:func:`register_task_kind`) and a task that names it (:func:`register_task`). A :class:`Task` is a
named dataset of one kind: which TFDS dataset, which features, which tokenizer.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

import grain
import ml_collections
from flax import nnx

from rfa.data.pipeline import load_source
from rfa.data.tokenizers import ByteTokenizer, PixelTokenizer, WordTokenizer

SITES = ("encoder", "decoder", "cross")  # encoder self-attention, decoder self-attention (causal), cross-attention


@dataclasses.dataclass(frozen=True)
class Task:
    """A named dataset of one kind.

    Attributes:
      dataset: TFDS name with config, e.g. ``"algorithmic/sort"``.
      kind: the name of its :class:`TaskKind` (``"seq2seq"``, ``"classification"``, ``"lm"``,
        ``"image_classification"``, ``"forecast"`` or a registered one).
      inputs: feature holding the input (the source, the text or image to classify, the LM text, the series).
      targets: the target text (seq2seq) or the integer label (classification); None where there is none.
      tokenizer: text <-> ids, special ids as in ``rfa.data.tokenizers``; None for kinds that read numbers.
      num_classes: labels of a classification task.
      generated: True for the project's own builders.
      prepare_on_first_use: a generated dataset is prepared by the first run that needs it; False for
        those that take minutes (``rfa prepare-data`` prepares them).
      train_split, validation_split, test_split: TFDS split names (slices such as ``"train[:90%]"`` work). Training
        evaluates on the validation split as it runs, for model selection, and on the test split once, at the
        end (``rfa.train.train_and_evaluate``).
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
    validation_split: str = "validation"
    test_split: str = "test"
    image_shape: tuple[int, int, int] | None = None
    pixel_max: float = 255.0
    season: int = 1
    channels: int = 1

    @property
    def vocab_size(self) -> int:
        return 0 if self.tokenizer is None else self.tokenizer.vocab_size


class TaskKind(abc.ABC):
    """One kind of task: its data, its model, its forward pass and metrics, its curves and what it answers.

    Subclass it, set the class attributes, write its abstract methods (and override the defaults your
    kind does differently), and register one instance with :func:`register_task_kind`. Batches are dicts
    of NumPy arrays with static shapes.

    Attributes:
      name: the registry name, which ``Task.kind`` gives.
      description: what it trains, for messages ("a language model").
      sites: the attention sites of its model (of :data:`SITES`): a config's gate or attention kind is
        checked against them.
      splits_sequence: its model can split its token sequences over the mesh's ``sequence`` axis.
      curves: the metrics drawn in a training workdir's ``curves.png``.
      rows_are_examples: each example of the source becomes exactly one row, in order (no filtering, no
        packing): a process then reads only the examples of its rows of each global batch
        (``rfa.data.pipeline.batches``).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = "a model"
    sites: ClassVar[tuple[str, ...]] = ("encoder",)
    splits_sequence: ClassVar[bool] = True
    curves: ClassVar[tuple[str, ...]] = ("loss", "accuracy")
    rows_are_examples: ClassVar[bool] = True

    def check_task(self, task: Task) -> None:
        """Raises a ValueError for a task this kind cannot read (say, images without an ``image_shape``)."""
        del task  # every task, unless the kind says otherwise

    def check_config(self, config: ml_collections.ConfigDict) -> None:
        """Raises ``rfa.workdir.ConfigError`` naming the fields of a training config this kind cannot train
        (MQAR: more pairs than the length holds); called by ``rfa.train.check_config``."""
        del config  # every config, unless the kind says otherwise

    # Data.

    def data_options(self, config: ml_collections.ConfigDict) -> dict:
        """Keyword arguments of :meth:`source` taken from a training config (forecasting: the horizon)."""
        return {}

    def source(self, task: Task, split: str, *, data_dir: str, max_length: int, **options):
        """The random-access examples of ``split`` (default: the TFDS source)."""
        return load_source(task, split, data_dir)

    @abc.abstractmethod
    def examples(self, task: Task, dataset: grain.MapDataset, *, max_length: int) -> grain.IterDataset:
        """The examples as the model reads them, one dict of fixed-shape arrays each (tokenized, filtered,
        packed or padded to ``max_length``), not yet batched."""

    # Model.

    @abc.abstractmethod
    def model_config(self, config: ml_collections.ConfigDict, task: Task, attention, *, sequence_axis) -> Any:
        """The model's config from a training config; ``attention(site)`` is the :class:`rfa.models.Site` of a site, and
        ``sequence_axis`` the mesh axis splitting the sequence (None: unsplit) for models that split it."""

    @abc.abstractmethod
    def build_model(self, model_config: Any, rngs: nnx.Rngs) -> nnx.Module:
        """The model of ``model_config``, initialized from ``rngs``."""

    # Training and evaluation.

    @abc.abstractmethod
    def forward(self, model: nnx.Module, batch: dict) -> tuple:
        """``(predictions, labels, weights)`` of a batch: logits or forecasts, their targets, what counts."""

    @abc.abstractmethod
    def metric_sums(self, model: nnx.Module, batch: dict, *, label_smoothing: float = 0.0) -> dict:
        """Sums over the batch that add across steps, devices and batches: at least ``loss`` (the training
        objective), ``weight`` (what it is averaged over) and ``tokens`` (inputs read, for throughput)."""

    @abc.abstractmethod
    def summarize(self, sums: dict) -> dict:
        """Means from :meth:`metric_sums`' sums (floats): at least ``loss``."""

    def results(self, config: ml_collections.ConfigDict) -> dict:
        """Fields this kind adds to a run's ``results.json`` (images: the architecture)."""
        return {}

    # Inference.

    def answer(
        self, model: nnx.Module, task: Task, text: str, *, max_length: int, max_new_tokens: int, beam_size: int
    ) -> str:
        """The trained model's output for one input text (``rfa decode``)."""
        raise ValueError(f"a {self.name} model does not answer text: decode a text task's workdir.")


_KINDS: dict[str, TaskKind] = {}
_TASKS: dict[str, Task] = {}


def register_task_kind(kind: TaskKind) -> TaskKind:
    """Adds a task kind under ``kind.name`` (an existing name is an error); returns it."""
    if not isinstance(kind, TaskKind):
        raise TypeError(f"expected a rfa.tasks.TaskKind instance, got {type(kind).__name__}.")
    if not kind.name or kind.name in _KINDS:
        raise ValueError(f"a task kind needs a new name; {kind.name!r} is empty or already registered.")
    _KINDS[kind.name] = kind
    return kind


def task_kind(name: str) -> TaskKind:
    """The registered kind called ``name``.

    Example:
      >>> task_kind("lm").curves
      ('loss', 'accuracy', 'perplexity')
    """
    if name not in _KINDS:
        raise ValueError(f"unknown task kind {name!r}; registered: {sorted(_KINDS)}.")
    return _KINDS[name]


def registered_task_kinds() -> tuple[str, ...]:
    return tuple(sorted(_KINDS))


def register_task(name: str, task: Task) -> Task:
    """Adds a named task (its kind must be registered, and must accept it); an existing name is an error."""
    if name in _TASKS:
        raise ValueError(f"a task named {name!r} is already registered.")
    task_kind(task.kind).check_task(task)
    _TASKS[name] = task
    return task


def get_task(name: str) -> Task:
    """The task called ``name``; a clear error for an unknown name."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(_TASKS)}.")
    return _TASKS[name]


def registered_tasks() -> tuple[str, ...]:
    return tuple(sorted(_TASKS))
