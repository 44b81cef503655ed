"""Task kinds and tasks: one module per kind, each one registered :class:`TaskKind` owning its data, model,
forward pass, metrics, curves and decoding; a :class:`Task` is a named dataset of one kind.

Importing this package registers the kinds ``seq2seq``, ``lm``, ``classification``,
``image_classification``, ``forecast`` and ``recall`` and the shipped tasks (:mod:`rfa.tasks.catalog`). Add a kind
by registering a :class:`TaskKind` subclass (:func:`register_task_kind`), a task with :func:`register_task`.
"""

from rfa.tasks import classification, forecast, image, lm, recall, seq2seq
from rfa.tasks.base import (
    SITES,
    Task,
    TaskKind,
    get_task,
    register_task,
    register_task_kind,
    registered_task_kinds,
    registered_tasks,
    task_kind,
)
from rfa.tasks.batches import eval_batches, train_batches
from rfa.tasks.catalog import SHIPPED
from rfa.tasks.seq2seq import shift_right

__all__ = [
    "SHIPPED",
    "SITES",
    "Task",
    "TaskKind",
    "classification",
    "eval_batches",
    "forecast",
    "get_task",
    "image",
    "lm",
    "recall",
    "register_task",
    "register_task_kind",
    "registered_task_kinds",
    "registered_tasks",
    "seq2seq",
    "shift_right",
    "task_kind",
    "train_batches",
]
