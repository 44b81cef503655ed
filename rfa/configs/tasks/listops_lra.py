"""ListOps at Long Range Arena's lengths (500-2000 tokens): classify the value 0-9 of a nested expression.

Run (prepare the data once, minutes: ``rfa prepare-data --dataset listops/lra``):
  rfa train --config listops_lra:positive --workdir workdir/train/listops_lra/positive
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS; the scales
- (none): LRA's published setup (Tay et al., ICLR 2021, Appendix): 4 layers, d_model 512, 8 heads, MLP 1024,
  batch 32, 5000 steps, L = 2000, learned positions and mean pooling. The optimizer is rfa's (AdamW, 1000
  warmup steps, inverse-square-root decay), not LRA's exact schedule.
- ``:<attention>,cpu``: what this repository's results table ran on a 2-core CPU: 2 layers, d_model 64,
  4 heads, MLP 128, m = 64, batch 4, 250 steps (1000 expressions, 1% of an epoch), still L = 2000;
  evaluated on 128 validation expressions.
- ``:<attention>,quick``: seconds-long test run on ``listops_lra_sample`` (same lengths, small splits,
  prepared on first use).
"""

from rfa.configs.common import task_config

CPU = {
    "batch_size": 4,
    "num_train_steps": 250,
    "log_every": 25,
    "eval_every": 250,
    "checkpoint_every": 125,
    "eval_batches": 32,
    "model.d_model": 64,
    "model.num_heads": 4,
    "model.mlp_dim": 128,
    "model.num_encoder_layers": 2,
    "attention.num_features": 64,
    "optimizer.warmup_steps": 25,
    "optimizer.schedule": "cosine",
    "optimizer.learning_rate": 1e-3,
}


def get_config(arg: str | None = None):
    return task_config(
        "listops_lra",
        arg,
        scales={
            "cpu": CPU,
            "quick": {
                "task": "listops_lra_sample",
                "max_length": 2000,
                "batch_size": 2,
                "num_train_steps": 4,
                "checkpoint_every": 4,
                "eval_every": 4,
                "eval_batches": 1,
            },
        },
        max_length=2000,
        batch_size=32,
        num_train_steps=5000,
        eval_every=1000,
        checkpoint_every=1000,
        eval_batches=0,  # the whole validation split
        **{
            "model.d_model": 512,
            "model.num_heads": 8,
            "model.mlp_dim": 1024,
            "model.num_encoder_layers": 4,
            "model.positional": "learned",
            "model.pooling": "mean",
            "attention.num_features": 256,
            "attention.chunk_size": 64,
            "optimizer.schedule": "inverse_sqrt",
            "optimizer.learning_rate": 1.0,
            "optimizer.warmup_steps": 1000,
        },
    )
