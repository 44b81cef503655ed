"""ListOps at the CPU scale (task ``listops_cpu``): MAX and MIN only, depth <= 3, <= 4 arguments, 8-32 tokens.

Run:
  rfa train --config listops_cpu:exact --workdir workdir/train/listops_cpu/exact
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long test run. The scale at which exact attention learns ListOps on a 2-core CPU in minutes; the Long
Range Arena lengths (``rfa/configs/tasks/listops_lra.py``) measure cost only there. A 2-layer classifier of width 64.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "listops_cpu",
        arg,
        max_length=32,
        batch_size=64,
        num_train_steps=1000,
        log_every=50,
        eval_every=250,
        checkpoint_every=250,
        eval_batches=0,  # the whole validation split (2000 expressions)
        **{"model.dropout_rate": 0.0, "optimizer.learning_rate": 2e-3},
    )
