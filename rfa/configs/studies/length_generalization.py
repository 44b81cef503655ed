"""Length generalization: which positions let a model sort strings longer than any it trained on
(``rfa.experiments.studies.length_generalization``).

Each attention kind trains with each positional encoding, once per seed, on ``config.task`` (strings of 2-32
letters), and is then evaluated once on ``config.longer_task`` (33-64 letters) at ``longer_max_length``: the
relative bias of Luo et al. (NeurIPS 2021) against absolute sinusoids and rotary.

Run:
  rfa study length_generalization --config length_generalization --workdir workdir/length
Variants: ``:quick`` trains the quick variants of two settings with one seed (seconds; the tests run it).
"""

import ml_collections

from rfa.configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.task = "sort"  # a configs/<task>.py of an algorithmic seq2seq task
    config.longer_task = "sort_longer"  # the same task on longer strings: evaluated once, on its test split
    config.longer_max_length = 72  # the length the trained models are rebuilt for (64 letters plus EOS fit)
    config.longer_batches = 0  # test batches of longer_task, of the run's batch size (0: the whole split)
    config.attention = ("exact", "positive")  # attention kinds (rfa.train.ATTENTION_VARIANTS)
    config.positional = ("sinusoidal", "rotary", "relative")  # the first is the reference of the verdicts
    config.seeds = (0, 1, 2)
    config.scale = "short"  # each run's "<attention>,<scale>" ("": the task config's own)
    config.data_dir = "data"
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {
                "attention": ("positive",),
                "positional": ("sinusoidal", "relative"),
                "seeds": (0,),
                "scale": "quick",
                "longer_batches": 4,
            },
        },
    )
