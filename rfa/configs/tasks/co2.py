"""Forecast weekly atmospheric CO₂ (Mauna Loa, statsmodels' bundled series) one year ahead from a lookback window.

Run:
  rfa train --config co2:positive --workdir workdir/train/co2/positive
  rfa study forecasting --config forecasting  # every kind, seasonal-naive, step time
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,long`` with a lookback
of 1024 weeks, ``:<attention>,short`` with 500 steps (the seeded table of the docs), ``:<attention>,quick`` for a
seconds-long test run. The model reads ``max_length`` weeks (lookback 256, patches of 4 weeks: 64 tokens) and
forecasts the next 52 (``model.horizon``); losses are on the series normalised by the training years' mean and
deviation; the chronological splits are 1958-1989 (train), 1989-1995 (validation), 1995-2001 (test).
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "co2",
        arg,
        scales={
            "quick": {"max_length": 64, "model.horizon": 8, "model.patch_length": 4},
            "long": {"max_length": 1024},  # a lookback of ~20 years: 256 tokens of 4 weeks
            "short": {"num_train_steps": 500, "eval_every": 250, "checkpoint_every": 250},  # 3 seeds on a CPU
        },
        max_length=256,  # the lookback, in weeks
        batch_size=32,
        num_train_steps=1500,
        log_every=50,
        eval_every=500,
        checkpoint_every=500,
        eval_batches=0,  # every validation (and, at the end, test) window
        **{
            "model.horizon": 52,
            "model.patch_length": 4,
            "model.d_model": 64,
            "model.num_heads": 4,
            "model.mlp_dim": 128,
            "model.num_encoder_layers": 2,
            "model.dropout_rate": 0.1,
            "attention.num_features": 64,
            "optimizer.warmup_steps": 100,
            "optimizer.weight_decay": 0.01,
        },
    )
