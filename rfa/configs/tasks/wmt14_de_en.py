"""WMT14 German to English (TFDS ``wmt14_translate/de-en``): byte-level translation with the encoder-decoder.

The dataset is TFDS's own: prepare it once, on a machine with network access, with
``tfds build wmt14_translate/de-en --data_dir=DATA --file_format=array_record`` (rfa reads it without TensorFlow).

Run:
  rfa train --config wmt14_de_en:positive --config.data_dir=DATA --workdir W
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long run. The model is the paper's base Transformer (Vaswani et al., 2017, Table 3) on bytes; pairs
longer than ``max_length`` bytes are dropped.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "wmt14_de_en",
        arg,
        max_length=256,  # bytes of source and of target
        batch_size=64,
        num_train_steps=100000,
        eval_every=5000,
        checkpoint_every=5000,
        eval_batches=50,
        **{
            "model.d_model": 512,
            "model.num_heads": 8,
            "model.mlp_dim": 2048,
            "model.num_encoder_layers": 6,
            "model.num_decoder_layers": 6,
            "model.norm": "post",
            "optimizer.schedule": "inverse_sqrt",
            "optimizer.learning_rate": 1.0,
            "optimizer.warmup_steps": 4000,
            "optimizer.label_smoothing": 0.1,
            "attention.num_features": 256,
        },
    )
