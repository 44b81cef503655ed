"""Pathfinder at the CPU scale (task ``pathfinder_cpu``): 16×16 images of two curves of three dashes (256 pixels).

Run:
  rfa train --config pathfinder_cpu:exact --workdir workdir/train/pathfinder_cpu/exact
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long test run. The smallest Pathfinder that keeps the task (follow a curve from one dot to the other,
among curves that do not touch), and the smallest tried on a 2-core CPU: exact attention stayed at 55% (the
dots' distance alone reads 54%) after these 1500 steps (docs/results/lra.md). A 2-layer classifier of width
64 over the pixels, mean-pooled.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "pathfinder_cpu",
        arg,
        max_length=256,
        batch_size=32,
        num_train_steps=1500,
        log_every=50,
        eval_every=500,
        checkpoint_every=500,
        eval_batches=0,  # the whole validation split (2000 images)
        **{"model.dropout_rate": 0.0, "optimizer.learning_rate": 2e-3},
    )
