"""Hedgehog attention distillation: a trained exact-attention model turned into a linear one.

Run:
  rfa study distillation --config distillation --workdir workdir/distill
Variants: ``:quick`` (seconds; the tests run it). Zhang et al., "The Hedgehog & the Porcupine:
Expressive Linear Attentions with Softmax Mimicry", ICLR 2024, Sec. 4.
"""

import ml_collections

from rfa.configs.common import apply_variant


def get_config(arg: str | None = None):
    config = ml_collections.ConfigDict()
    config.task = "sort"  # configs/<task>.py: the teacher (":exact"), the student and the baseline (":hedgehog")
    config.feature_dim = 16  # Hedgehog's d' per head (the model's head_dim is 16): 2d' features
    config.distill_steps = 300  # stage 1: steps training the maps alone on the teacher's attention weights
    config.distill_learning_rate = 1e-2  # Adam, stage 1
    config.finetune_steps = 300  # stage 2: steps fine-tuning the whole student on the task
    config.seeds = (0, 1, 2)  # every run once per seed; the table reports mean ± standard deviation
    config.quick = False  # every run's ",quick" variant and a few steps per stage
    config.data_dir = "data"  # TFDS data_dir of every run
    return apply_variant(
        config,
        arg,
        {
            "full": {},
            "quick": {"feature_dim": 8, "distill_steps": 6, "finetune_steps": 4, "quick": True, "seeds": (0,)},
        },
    )
