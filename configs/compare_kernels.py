"""The kernel comparison on real tasks: which tasks and attention kinds ``experiments.compare_kernels`` trains.

Run:
  python -m experiments.compare_kernels --config configs/compare_kernels.py --workdir workdir/train
Variants: ``:quick`` trains the quick variants of two kinds on one task (seconds; the tests run it).
"""

import ml_collections

from rfa.workdir import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.tasks = ("sort", "listops", "python_source")  # names of configs/<task>.py
    config.attention = (  # exact first
        "exact", "trig", "positive", "positive_iid", "simplex_positive", "hyperbolic", "oprf", "hybrid", "saderf",
        "elu", "taylor", "rfa", "gated_rfa", "hedgehog", "linformer",
    )  # fmt: skip
    config.skip = (  # (task, attention) pairs that cannot train: no decoder to gate, no bidirectional site
        ("listops", "gated_rfa"), ("python_source", "linformer"),
    )  # fmt: skip
    config.quick = False  # train each pair's ",quick" variant
    config.data_dir = "data"  # TFDS data_dir for every run
    return apply_variant(
        config,
        arg,
        {"full": {}, "quick": {"tasks": ("sort",), "attention": ("exact", "positive"), "quick": True, "skip": ()}},
    )
