"""Datasets and input pipelines: the project's TFDS builders, task registry, tokenizers, grain batches.

Importing this package registers the builders ``algorithmic/{copy,reverse,sort}``,
``listops/{short,lra,lra_sample}``, ``pathfinder/{32,32_sample}``, ``python_source``, ``digits`` and
``series/{co2,sunspots}`` with TFDS.
"""

from rfa.data.algorithmic import Algorithmic
from rfa.data.digits import Digits
from rfa.data.listops import Listops
from rfa.data.pathfinder import Pathfinder
from rfa.data.pipeline import DatasetMissingError, eval_batches, load_source, prepare, train_batches
from rfa.data.python_source import PythonSource
from rfa.data.series import Series
from rfa.data.tasks import TASKS, Task, get_task
from rfa.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer, PixelTokenizer, WordTokenizer

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "TASKS",
    "Algorithmic",
    "ByteTokenizer",
    "DatasetMissingError",
    "Digits",
    "Listops",
    "Pathfinder",
    "PixelTokenizer",
    "PythonSource",
    "Series",
    "Task",
    "WordTokenizer",
    "eval_batches",
    "get_task",
    "load_source",
    "prepare",
    "train_batches",
]
