"""ListOps (Long Range Arena task, short lengths 16-128): classify the value 0-9 of a nested expression.

Run:
  rfa train --config listops:positive --workdir workdir/train/listops/positive
Variants: ``:<attention>`` with <attention> a variant of rfa.train.ATTENTION_VARIANTS (``rfa configs`` lists
them), ``:<attention>,short`` with 300 steps (the seeded tables of compare_kernels) and
``:<attention>,quick`` for a seconds-long test run.
LRA's own lengths (500-2000) are the task ``listops_lra``: ``--config.task=listops_lra --config.max_length=2000``.
"""

from rfa.configs.common import SHORT, task_config


def get_config(arg: str | None = None):
    return task_config(
        "listops",
        arg,
        scales={"short": SHORT},
        max_length=128,  # the short config's longest expression
        batch_size=32,
        num_train_steps=600,
        eval_every=200,
        checkpoint_every=200,
        eval_batches=0,  # the whole validation split (2000 expressions)
    )
