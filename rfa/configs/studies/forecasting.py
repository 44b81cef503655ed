"""The forecasting comparison: train the forecaster with each attention kind, score it against seasonal-naive,
and time one training step against the lookback length.

Run:
  rfa study forecasting --config forecasting --workdir workdir/forecast
Variants: ``:quick`` (seconds; the tests run it); ``:sunspots`` the same kinds on the yearly sunspot numbers
(``rfa/configs/tasks/sunspots.py``), without the timing, at the configuration of lower validation MSE: the small
regularized model for its 216 training years, or the ``earlier`` larger one; ``:long``
trains exact, positive and elu with a lookback of 1024 weeks (``rfa/configs/tasks/co2.py:<attention>,long``), without
the
timing.
"""

import ml_collections

from rfa.configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.task = "co2"  # a configs/<task>.py of a forecasting task
    config.attention = ("exact", "positive", "simplex_positive", "elu", "taylor", "hedgehog")  # exact first
    config.seeds = (0, 1, 2)  # every kind trains once per seed; the table reports mean ± standard deviation
    config.scale = ""  # each run's "<attention>,<scale>" ("": the task config's own)
    config.candidates = ()  # scales to select among on validation (mean MSE over kinds and seeds); (): config.scale
    config.data_dir = "data"
    config.lookbacks = (128, 256, 512, 1024, 2048)  # lookbacks of the step-time figure (patch_length 1: tokens); ()
    config.timing_kinds = ("exact", "positive")  # kinds of the step-time figure
    config.repeats = 3  # timed steps per lookback (median)
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {
                "attention": ("exact", "positive"),
                "scale": "quick",
                "lookbacks": (32, 64),
                "repeats": 2,
                "seeds": (0,),  # seeds are the compare_kernels test's; here the table and figure
            },
            "sunspots": {"task": "sunspots", "lookbacks": (), "candidates": ("", "earlier")},
            "long": {"attention": ("exact", "positive", "elu"), "scale": "long", "lookbacks": ()},
        },
    )
