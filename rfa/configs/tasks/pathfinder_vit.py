"""A Vision Transformer on Pathfinder-32's images (are the two dots joined by one dashed curve?).

Run (prepare the data once, minutes: ``rfa prepare-data --dataset pathfinder/32``):
  rfa train --config pathfinder_vit:positive --workdir workdir/pathfinder_vit/positive
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long test run on ``pathfinder32_image_sample``. The model: 4×4 patches (64 tokens and a class token),
2 pre-norm layers of width 64 with 4 heads, 2-D sinusoidal positions; LRA's Pathfinder reads the same images
pixel by pixel instead (rfa/configs/tasks/pathfinder.py).
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "pathfinder32_image",
        arg,
        scales={"quick": {"task": "pathfinder32_image_sample", "model.patch_size": 4}},
        batch_size=64,
        num_train_steps=5000,
        log_every=100,
        eval_every=1000,
        checkpoint_every=1000,
        eval_batches=32,
        **{
            "model.d_model": 64,
            "model.num_heads": 4,
            "model.mlp_dim": 128,
            "model.num_encoder_layers": 2,
            "model.patch_size": 4,
            "model.positional": "sinusoidal",
            "model.pooling": "cls",
            "attention.num_features": 64,
            "optimizer.warmup_steps": 200,
        },
    )
