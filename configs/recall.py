"""Associative recall against recurrent state size: which kinds ``experiments.studies.recall`` trains on MQAR.

Run:
  python -m experiments.studies.recall --config configs/recall.py --workdir workdir/recall
Variants: ``:quick`` trains the quick variants of two kinds, two seeds (seconds; the tests run it). Linformer is
not among the kinds: it cannot be causal, and MQAR is read by a causal decoder.
"""

import ml_collections

from configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.task = "mqar"  # a configs/<task>.py of a recall task
    config.attention = (  # exact first: the reference of the verdicts
        "exact", "positive", "oprf", "saderf", "gated_rfa", "hedgehog", "elu", "relu", "taylor", "fourier", "gla",
    )  # fmt: skip
    config.num_features = (4, 32)  # m of the kinds that take one (random features, Hedgehog's d')
    config.seeds = (0, 1, 2)
    config.scale = ""  # each run's "<attention>,<scale>" ("": the task config's own)
    config.data_dir = "data"
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {"attention": ("exact", "positive"), "num_features": (8,), "seeds": (0, 1), "scale": "quick"},
        },
    )
