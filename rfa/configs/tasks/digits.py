"""A Vision Transformer on scikit-learn's handwritten digits (8×8 pixels, 10 classes; no download).

Run:
  rfa train --config digits:positive --workdir workdir/train/digits/positive
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS (exact, positive, elu, ...),
``:<attention>,short`` (750 steps, the seeded table's scale) and ``:<attention>,quick`` for a seconds-long test
run. The model: 2×2 patches (16 tokens and a class token), 2 pre-norm layers of width 64 with 4 heads, learned
positions; validated on the validation split (15%), tested once at the end on the test split (15%, 269 images).
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "digits",
        arg,
        scales={
            "quick": {"model.d_model": 32, "model.num_heads": 2, "model.mlp_dim": 64},
            "short": {"num_train_steps": 750, "eval_every": 250, "checkpoint_every": 250},  # the seeded table
        },
        batch_size=64,
        num_train_steps=1500,
        log_every=50,
        eval_every=500,
        checkpoint_every=500,
        eval_batches=0,  # the whole validation split (and, at the end, the whole test split)
        **{
            "model.d_model": 64,
            "model.num_heads": 4,
            "model.mlp_dim": 128,
            "model.num_encoder_layers": 2,
            "model.patch_size": 2,
            "model.positional": "learned",
            "model.pooling": "cls",
            "model.dropout_rate": 0.1,
            "attention.num_features": 64,
            "optimizer.warmup_steps": 100,
        },
    )
