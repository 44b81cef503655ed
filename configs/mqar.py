"""Multi-query associative recall (MQAR; rfa.data.mqar): recall the values of 4 keys in sequences of 32 tokens.

Run:
  python -m experiments.train --config configs/mqar.py:positive --workdir workdir/train/mqar/positive
  python -m experiments.studies.recall --config configs/recall.py  # every kind against recurrent state size
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS (Linformer cannot be causal and is
refused), ``:<attention>,quick`` for a seconds-long test run. Sizes: ``--config.recall.vocab_size``,
``--config.recall.num_pairs`` and the length ``--config.max_length``. A 2-layer decoder of width 64 (4 heads of
16) as in Zoology's smallest models; accuracy is counted at query positions only. The sizes are the CPU scale:
exact attention reaches 99.9% validation accuracy by step 400 of 800 with 3 seeds (about a minute and a half per
run here). With 600 steps and 50 warmup steps, two seeds stayed at 46-50%: the jump to recall is sensitive to the
schedule. 8 pairs in 64 tokens over 256 ids left exact attention at 25% after 1000 steps at 3e-3; the scales
``pairs8`` and ``pairs16`` (8 pairs in 64 tokens, 16 in 128, over 256 ids) train 3000 steps at 1e-3.
"""

from configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "mqar",
        arg,
        scales={
            "quick": {"max_length": 16, "recall.num_train": 256, "recall.num_eval": 64},
            **{  # the harder settings of configs/recall.py: a smaller rate and a longer schedule than 4 pairs need
                f"pairs{pairs}": {
                    "max_length": 8 * pairs,
                    "recall.num_pairs": pairs,
                    "recall.vocab_size": 256,
                    "num_train_steps": 3000,
                    "eval_every": 500,
                    "checkpoint_every": 500,
                    "optimizer.learning_rate": 1e-3,
                }
                for pairs in (8, 16)
            },
        },
        max_length=32,
        batch_size=64,
        num_train_steps=800,
        log_every=50,
        eval_every=200,
        checkpoint_every=200,
        eval_batches=0,  # the whole validation split
        **{
            "recall.vocab_size": 32,
            "recall.num_pairs": 4,
            "model.d_model": 64,
            "model.num_heads": 4,
            "model.mlp_dim": 128,
            "model.num_decoder_layers": 2,
            "model.dropout_rate": 0.0,
            "optimizer.learning_rate": 3e-3,
            "optimizer.warmup_steps": 100,
            "optimizer.weight_decay": 0.1,
        },
    )
