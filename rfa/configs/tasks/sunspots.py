"""Forecast the yearly sunspot number (1700-2008, statsmodels' bundled series) one solar cycle ahead.

Run:
  rfa train --config sunspots:positive --workdir workdir/train/sunspots/positive
  rfa study forecasting --config forecasting --config.task=sunspots --workdir workdir/forecast
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long test run, ``:<attention>,earlier`` for the first configuration (lookback 64, two layers of width 32,
less regularization), which ``rfa/configs/studies/forecasting.py:sunspots`` selects against on the validation years.
The model
reads ``max_length`` years (lookback 32, patches of 4 years: 8 tokens) and forecasts the next 11 (``model.horizon``,
one solar cycle); losses are on the series normalised by the training years' mean and deviation; the chronological
splits are 1700-1915 (train), 1916-1962 (validation), 1963-2008 (test). With 216 training years (174 training
windows) the model is small and regularized: one layer of width 16, dropout 0.2, weight decay 0.1, 400 steps (3.8k
parameters).
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "sunspots",
        arg,
        scales={
            "quick": {"max_length": 32, "model.horizon": 4, "model.patch_length": 4},
            "earlier": {  # the first configuration: larger, less regularized (selected against on validation)
                "max_length": 64,
                "num_train_steps": 600,
                "model.d_model": 32,
                "model.num_heads": 4,
                "model.mlp_dim": 64,
                "model.num_encoder_layers": 2,
                "model.dropout_rate": 0.1,
                "attention.num_features": 32,
                "optimizer.warmup_steps": 50,
                "optimizer.weight_decay": 0.01,
            },
        },
        max_length=32,  # the lookback, in years
        batch_size=16,
        num_train_steps=400,
        log_every=50,
        eval_every=200,
        checkpoint_every=200,
        eval_batches=0,  # every validation (and, at the end, test) window
        **{
            "model.horizon": 11,
            "model.patch_length": 4,
            "model.d_model": 16,
            "model.num_heads": 2,
            "model.mlp_dim": 32,
            "model.num_encoder_layers": 1,
            "model.dropout_rate": 0.2,
            "attention.num_features": 16,
            "optimizer.warmup_steps": 40,
            "optimizer.weight_decay": 0.1,
        },
    )
