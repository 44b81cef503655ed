"""Character-level language model of the Python standard library's source (held-out files for evaluation).

Run:
  rfa train --config python_source:positive --workdir workdir/train/python_source/positive
Variants: ``:<attention>`` with <attention> a variant of rfa.train.ATTENTION_VARIANTS (``rfa configs`` lists
them), ``:<attention>,short`` with 300 steps (the seeded tables of compare_kernels) and
``:<attention>,quick`` for a seconds-long test run.
"""

from rfa.configs.common import SHORT, task_config


def get_config(arg: str | None = None):
    return task_config(
        "python_source",
        arg,
        scales={"short": SHORT},
        max_length=256,  # bytes of context
        batch_size=8,
        num_train_steps=500,
        eval_every=200,
        checkpoint_every=200,
        eval_batches=16,
        **{"model.d_model": 128, "model.mlp_dim": 256, "attention.chunk_size": 64},
    )
