"""Associative recall against recurrent state size: which kinds ``rfa.experiments.studies.recall`` trains on MQAR.

Run:
  rfa study recall --config recall --workdir workdir/recall
Variants: ``:quick`` is a smoke test: the quick variants of two kinds, two seeds (seconds; the tests run it), at
a size where nothing recalls; its output says so and compares nothing. ``:pairs4_l64`` is the harder setting (4 pairs
in 64 tokens over 128 ids; ``rfa/configs/tasks/mqar.py``'s scale of that name): one kind per family, random
features at m = 16, 64 and 256, Hedgehog at d' = 16 and 64 (OPRF, the second softmax-kernel map, and Hedgehog at 256
are left out for CPU time), the delta rule, with its own map and with an estimator's (``gated_deltanet_positive``
at m = 16 and 64, ``gated_deltanet_elu``), a sliding window of 16 tokens (a window of 64 covers a whole sequence of
64) and two hybrid stacks: Gated DeltaNet below exact attention in the task's 2 layers, and Kimi Linear's 3 KDA
layers to 1 exact, which takes 4 layers (``num_layers_of``). Each kind's learning rate is chosen on validation among
three (one seed per rate, at its middle m), then every setting of the kind trains three seeds at that rate.
``:pairs4_l128`` runs one kind per family at twice the length, each at one m (16): exact attention, elu and DeltaNet
with their own sweeps, the others at the rate their sweep kept at 64 tokens (``learning_rate_of``; CPU time).
``:pairs8_v256`` is a first try at 8 pairs, over 256 ids. Linformer is not among the kinds: it cannot be causal, and
MQAR is read by a causal decoder.
"""

import ml_collections

from rfa.configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.task = "mqar"  # a configs/<task>.py of a recall task
    config.attention = (  # exact first: the reference of the verdicts
        "exact",
        "positive",
        "oprf",
        "saderf",
        "gated_rfa",
        "hedgehog",
        "elu",
        "relu",
        "taylor",
        "fourier",
        "gla",
    )
    config.num_features = (4, 32)  # m of the kinds that take one (random features, Hedgehog's d', a window)
    config.num_features_of = {}  # {attention: its own m}, in place of num_features
    config.num_layers_of = {}  # {attention: its decoder's layer count}, for a stack pattern longer than the task's
    config.seeds = (0, 1, 2)
    config.scale = ""  # each run's "<attention>,<scale>" ("": the task config's own)
    config.data_dir = "data"
    config.smoke_test = False  # True: the output says so and compares nothing (the quick variant)
    config.learning_rates = ()  # (): the task config's rate; else each setting keeps the best on validation
    config.sweep_seed = 0  # the seed of the learning-rate sweep's runs
    config.sweep_per_kind = False  # True: one sweep per kind, at its middle m, whose rate serves all its m
    config.learning_rate_of = {}  # {attention: rate}: no sweep, this rate (chosen elsewhere), for all its m
    config.rate_from = ""  # where learning_rate_of's rates were chosen, as a row records it (e.g. "pairs4_l64")
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {
                "attention": ("exact", "positive"),
                "num_features": (8,),
                "seeds": (0, 1),
                "scale": "quick",
                "smoke_test": True,
            },
            **{
                name: {
                    "attention": (
                        "exact",
                        "positive",
                        "elu",
                        "taylor",
                        "hedgehog",
                        "gla",
                        "deltanet",
                        "gated_deltanet",
                        "kda",
                        "sliding_window",
                        "hybrid_gated_deltanet",
                        "hybrid_kda",
                        "gated_deltanet_positive",
                        "gated_deltanet_elu",
                    ),
                    "num_features": (16, 64, 256),
                    # a window of 64 or more covers the whole of pairs4_l64's sequences: exact attention
                    "num_features_of": {
                        "hedgehog": (16, 64),
                        "sliding_window": (16,),
                        "gated_deltanet_positive": (16, 64),
                    },
                    "num_layers_of": {"hybrid_kda": 4},  # 3 KDA layers to 1 exact: a deeper model than the others
                    "scale": name,
                    "learning_rates": rates,
                    "sweep_per_kind": True,
                }
                for name, rates in (("pairs4_l64", (1e-3, 3e-3, 1e-2)), ("pairs8_v256", (3e-4, 1e-3, 3e-3)))
            },
            # One kind per family at twice the length, one m each: exact attention, elu and DeltaNet have their own
            # sweep; CPU time gives the others the rate their sweep kept at 64 tokens (results/recall_pairs4_l64_cpu).
            "pairs4_l128": {
                "attention": (
                    "exact",
                    "elu",
                    "deltanet",
                    "positive",
                    "taylor",
                    "hedgehog",
                    "gla",
                    "gated_deltanet",
                    "sliding_window",
                    "hybrid_gated_deltanet",
                    "gated_deltanet_positive",
                ),
                "num_features": (16,),
                "scale": "pairs4_l128",
                "learning_rates": (1e-3, 3e-3, 1e-2),
                "sweep_per_kind": True,
                "learning_rate_of": {
                    "positive": 1e-2,
                    "taylor": 3e-3,
                    "hedgehog": 3e-3,
                    "gla": 3e-3,
                    "gated_deltanet": 1e-2,
                    "sliding_window": 1e-2,
                    "hybrid_gated_deltanet": 1e-3,
                    "gated_deltanet_positive": 1e-2,
                },
                "rate_from": "pairs4_l64",
            },
        },
    )
