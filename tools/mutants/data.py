"""Mutants of rfa/data/: the generated datasets and the input pipeline.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import MULTIPROCESS

PROCESS_ROWS_TEST = (
    "tests/data/test_data.py::test_processes_build_the_global_batches_of_one_process_each_reading_its_rows"
)

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "builder-unseeded",
        "rfa/data/algorithmic.py",
        "        rng = np.random.default_rng([zlib.crc32(config.name.encode()), zlib.crc32(split.encode())])",
        "        rng = np.random.default_rng()",
        ("tests/data/test_golden.py",),
        "a dataset generated from an unseeded generator",
    ),
    # Attention forms.
    Mutant(
        "series-normalised-by-its-own-split",
        "rfa/data/series.py",
        "        mean, std = normalization(train_values)\n",
        "        mean, std = normalization(split_values)\n",
        ("tests/data/test_series.py",),
        "evaluation windows normalised with statistics of the future",
    ),
    # Data.
    Mutant(
        "sort-descending",
        "rfa/data/algorithmic.py",
        '"sort": lambda s: "".join(sorted(s))',
        '"sort": lambda s: "".join(sorted(s, reverse=True))',
        ("tests/data",),
        "the sort task's targets sorted the wrong way",
    ),
    Mutant(
        "listops-median-mean",
        "rfa/data/listops.py",
        '    "[MED": lambda args: int(statistics.median(args)),',
        '    "[MED": lambda args: int(statistics.mean(args)),',
        ("tests/data",),
        "ListOps' MED computes the mean",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "data-rows-duplicated-across-processes",
        "rfa/data/pipeline.py",
        "        self.offset = shard[0] * self.rows\n",
        "        self.offset = 0\n",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "process 1 reads process 0's rows: half the batch, twice",
    ),
    Mutant(
        "every-process-reads-every-row",
        "rfa/data/pipeline.py",
        "    if not rows_are_examples:\n        read = _counted(",
        "    if True:\n        read = _counted(",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "every process reads and tokenizes the whole global batch and keeps its block (the input work of one "
        "process, on every process)",
    ),
    Mutant(
        "data-position-not-moved-to-the-new-process-count",
        "rfa/data/pipeline.py",
        '    return {**position, "next_index": position["next_index"] // count}\n',
        "    return position\n",
        (MULTIPROCESS, PROCESS_ROWS_TEST),
        "a run resumed on another number of processes starts its data at the wrong batch",
    ),
    Mutant(
        "rows-of-other-processes-left-in-the-batch",
        "rfa/data/pipeline.py",
        "value[index * rows : (index + 1) * rows] for key",
        "value[:rows] for key",
        (PROCESS_ROWS_TEST,),
        "where every process reads the whole batch (sort), process 1 keeps process 0's block",
    ),
    # Claims everywhere (issue 57).
    Mutant(
        "mqar-queries-without-values",
        "rfa/data/mqar.py",
        "    inputs[queries], inputs[queries + 1] = keys, values\n",
        "    inputs[queries] = keys\n",
        ("tests/data/test_mqar.py",),
        "a query is not followed by its value",
    ),
    Mutant(
        "mqar-length-unchecked",
        "rfa/data/mqar.py",
        "    if 4 * num_pairs > length:\n",
        "    if 2 * num_pairs > length:\n",
        ("tests/data/test_mqar.py",),
        "more pairs than the length holds slip through to the generator",
    ),
    Mutant(
        "python-source-without-test-files",
        "rfa/data/python_source.py",
        '{0: "validation", 1: "test"}',
        '{0: "validation", 1: "validation"}',
        ("tests/data/test_data.py::test_python_source_splits_by_file",),
        "python_source's test split is empty",
    ),
    Mutant(
        "listops-cpu-with-every-operator",
        "rfa/data/listops.py",
        "    operator = rng.choice(list(config.operators))\n",
        "    operator = rng.choice(list(OPERATORS))\n",
        ("tests/data/test_data.py::test_the_cpu_scale_of_listops_keeps_max_and_min_at_small_depth",),
        "the CPU scale of ListOps draws MED and SM too",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "longer-strings-not-longer",
        "rfa/data/algorithmic.py",
        "            min_length=33,\n",
        "            min_length=2,\n",
        ("tests/data/test_data.py::test_longer_strings_lie_beyond_every_training_length",),
        "the longer strings overlap the training lengths",
    ),
    Mutant(
        "pathfinder-distance-unmatched",
        "rfa/data/pathfinder.py",
        "                pairs = np.abs(distances - span) <= config.distance_tolerance\n",
        "                pairs = np.abs(distances - span) >= 0.0\n",
        ("tests/data/test_long_range_arena.py",),
        "label-0 dots at any distance: a threshold on their distance reads the label",
    ),
]
