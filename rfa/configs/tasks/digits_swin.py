"""A Swin Transformer on scikit-learn's handwritten digits (8×8 pixels, 10 classes; no download).

Run:
  rfa train --config digits_swin:exact --workdir workdir/train/digits_swin/exact
  rfa train --config digits_swin:positive --workdir workdir/train/digits_swin/positive
The model: 1×1 patches (an 8×8 map of 32-wide tokens), a first stage of 2 blocks in 4×4 (shifted) windows,
patch merging, a second stage of 2 blocks of width 64 over the 4×4 map. The attention variant sets the second
stage: ``exact`` keeps both stages windowed (the map is one window there), any other kind makes the second
stage attend globally with that kind (``model.swin_windowed = (True, False)``), so windows against random
features is the config string. ``:<attention>,short`` (750 steps) is the seeded table's scale, ``:<attention>,quick``
a seconds-long test run.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    config = task_config(
        "digits",
        arg,
        scales={
            "quick": {"model.d_model": 16, "model.mlp_dim": 32, "model.swin_depths": (2, 1)},
            "short": {"num_train_steps": 750, "eval_every": 250, "checkpoint_every": 250},  # the seeded table
        },
        batch_size=64,
        num_train_steps=1500,
        log_every=50,
        eval_every=500,
        checkpoint_every=500,
        eval_batches=0,  # the whole validation split (and, at the end, the whole test split)
        **{
            "model.architecture": "swin",
            "model.d_model": 32,
            "model.mlp_dim": 64,
            "model.patch_size": 1,
            "model.window_size": 4,
            "model.swin_depths": (2, 2),
            "model.swin_heads": (2, 4),
            "model.dropout_rate": 0.1,
            "attention.num_features": 64,
            "optimizer.warmup_steps": 100,
        },
    )
    config.model.swin_windowed = (True, config.attention.kind == "softmax")
    return config
