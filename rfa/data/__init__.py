"""Datasets and input pipelines: the project's TFDS builders, tokenizers, grain batches (tasks: ``rfa.tasks``).

Importing this package registers the builders ``algorithmic/{copy,reverse,sort}``,
``listops/{short,lra,lra_sample}``, ``mqar``, ``pathfinder/{32,32_sample}``, ``python_source``, ``digits`` and
``series/{co2,sunspots}`` with TFDS.
"""

from rfa.data.algorithmic import Algorithmic
from rfa.data.digits import Digits
from rfa.data.listops import Listops
from rfa.data.mqar import Mqar
from rfa.data.pathfinder import Pathfinder
from rfa.data.pipeline import (
    DatasetMissingError,
    batches,
    examples_read,
    global_position,
    load_source,
    local_position,
    prepare,
)
from rfa.data.python_source import PythonSource
from rfa.data.series import Series
from rfa.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer, PixelTokenizer, WordTokenizer

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "Algorithmic",
    "ByteTokenizer",
    "DatasetMissingError",
    "Digits",
    "Listops",
    "Mqar",
    "Pathfinder",
    "PixelTokenizer",
    "PythonSource",
    "Series",
    "WordTokenizer",
    "batches",
    "examples_read",
    "global_position",
    "load_source",
    "local_position",
    "prepare",
]
