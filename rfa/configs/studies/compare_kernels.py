"""The kernel comparison on real tasks: which tasks and attention kinds ``rfa.experiments.studies.compare_kernels``
trains.

Run:
  rfa study compare_kernels --config compare_kernels --workdir workdir/train
Variants: ``:quick`` trains the quick variants of two kinds on one task (seconds; the tests run it);
``:lra`` the Long Range Arena tasks at their real lengths (ListOps 2000 tokens, Pathfinder-32 1024 pixels;
prepare their data first: ``rfa prepare-data``) at the ``cpu`` scale of their configs, and
``:lra_quick`` those tasks' quick runs on their sample data; ``:vision`` the Vision Transformer and the Swin
Transformer on the handwritten digits; ``:listops_cpu`` ListOps at the scale a CPU learns (MAX and MIN, 8-32
tokens, 1000 steps), eight kinds; ``:sort`` every kind on sort at its ``short`` scale (300 steps), five seeds, a
sliding window of w = 8 (narrower than the longer strings); ``:python_source`` the character LM at its ``short``
scale (300 steps), thirteen kinds (the delta rule's among them).
"""

import ml_collections

from rfa.configs.common import apply_variant

DELTA_RULE_AND_WINDOW = ("deltanet", "gated_deltanet", "sliding_window", "hybrid_gated_deltanet")


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.tasks = ("sort", "listops", "python_source")  # names of configs/<task>.py
    config.attention = (  # exact first
        "exact",
        "trig",
        "positive",
        "positive_iid",
        "simplex_positive",
        "hyperbolic",
        "oprf",
        "hybrid",
        "saderf",
        "elu",
        "taylor",
        "rfa",
        "gated_rfa",
        "hedgehog",
        "linformer",
        "fourier",
        "gla",
    )
    config.skip = (  # (task, attention) pairs that cannot train: no decoder to gate, no bidirectional site
        ("listops", "gated_rfa"),
        ("listops", "gla"),
        ("python_source", "linformer"),
    )
    config.seeds = (0, 1, 2)  # every pair trains once per seed; the table reports mean ± standard deviation
    config.scale = ""  # train each pair's "<attention>,<scale>" variant ("": the task config's own scale)
    # {attention: its one m}, in place of its task config's (a sliding window's w); set it in a variant, as :sort does
    config.num_features_of = {}
    config.data_dir = "data"  # TFDS data_dir for every run
    lra = {
        "tasks": ("listops_lra", "pathfinder"),
        "attention": ("exact", "positive", "simplex_positive", "elu", "taylor", "hedgehog", "linformer"),
        "skip": (),
        "scale": "cpu",
    }
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {
                "tasks": ("sort",),
                "attention": ("exact", "positive"),
                "scale": "quick",
                "skip": (),
                "seeds": (0, 1),
                "num_features_of": {"positive": 8},
            },
            "lra": lra,
            "lra_quick": {**lra, "attention": ("exact", "positive"), "scale": "quick", "seeds": (0,)},
            "listops_cpu": {
                "tasks": ("listops_cpu",),
                "attention": ("exact", "positive", "oprf", "elu", "hedgehog", "taylor", "saderf", "linformer"),
                "skip": (),
            },
            "sort": {
                "tasks": ("sort",),
                "attention": (*config.attention, *DELTA_RULE_AND_WINDOW),
                "skip": (),
                "scale": "short",
                "seeds": (0, 1, 2, 3, 4),
                "num_features_of": {"sliding_window": 8},
            },
            "python_source": {
                "tasks": ("python_source",),
                "attention": (
                    "exact",
                    "positive",
                    "oprf",
                    "saderf",
                    "elu",
                    "taylor",
                    "hedgehog",
                    "gated_rfa",
                    "gla",
                    *DELTA_RULE_AND_WINDOW,
                ),
                "skip": (),
                "scale": "short",
            },
            "vision": {
                "tasks": ("digits", "digits_swin"),
                "attention": ("exact", "positive", "simplex_positive", "oprf", "elu", "taylor", "hedgehog"),
                "skip": (("digits_swin", "oprf"), ("digits_swin", "taylor"), ("digits_swin", "hedgehog")),  # CPU time
            },
        },
    )
