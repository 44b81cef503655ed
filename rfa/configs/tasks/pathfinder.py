"""Pathfinder-32 (Long Range Arena): are the two dots of a 32×32 image joined by one dashed curve? (1024 pixels)

Run (prepare the data once, minutes: ``rfa prepare-data --dataset pathfinder/32``):
  rfa train --config pathfinder:positive --workdir workdir/train/pathfinder/positive
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS; the scales
- (none): LRA's published setup for Pathfinder-32 (its base config): 1 layer, d_model 32, 2 heads, MLP 32,
  batch 512, 200 epochs of the 160k training images (62,400 steps), learning rate 1e-3 with 312 warmup steps
  and cosine decay, no weight decay, sinusoidal positions, mean pooling. LRA's heads are 8 wide (qkv_dim 16);
  rfa's are d_model / heads = 16.
- ``:<attention>,cpu``: what this repository's results table ran on a 2-core CPU: the same model (m = 64),
  batch 16, 400 steps (6400 images, 4% of an epoch), evaluated on 512 validation images.
- ``:<attention>,quick``: seconds-long test run on ``pathfinder32_sample`` (the same images, small splits,
  prepared on first use).
"""

from rfa.configs.common import task_config

EPOCH = 160_000 // 512  # steps per epoch at LRA's batch

CPU = {
    "batch_size": 16,
    "num_train_steps": 400,
    "log_every": 50,
    "eval_every": 400,
    "checkpoint_every": 200,
    "eval_batches": 32,
    "optimizer.warmup_steps": 50,
}


def get_config(arg: str | None = None):
    return task_config(
        "pathfinder32",
        arg,
        scales={
            "cpu": CPU,
            "quick": {
                "task": "pathfinder32_sample",
                "max_length": 1024,
                "batch_size": 4,
                "num_train_steps": 4,
                "checkpoint_every": 4,
                "eval_every": 4,
                "eval_batches": 1,
                "model.d_model": 32,
                "model.num_heads": 2,
                "model.mlp_dim": 32,
            },
        },
        max_length=1024,
        batch_size=512,
        num_train_steps=200 * EPOCH,
        log_every=EPOCH // 4,
        eval_every=EPOCH * 10,
        checkpoint_every=EPOCH * 10,
        eval_batches=0,  # the whole validation split
        **{
            "model.d_model": 32,
            "model.num_heads": 2,
            "model.mlp_dim": 32,
            "model.num_encoder_layers": 1,
            "model.positional": "sinusoidal",
            "model.pooling": "mean",
            "attention.num_features": 64,
            "attention.chunk_size": 64,
            "optimizer.learning_rate": 1e-3,
            "optimizer.warmup_steps": EPOCH,
            "optimizer.schedule": "cosine",
            "optimizer.final_fraction": 0.0,
            "optimizer.weight_decay": 0.0,
        },
    )
