"""TED talks Portuguese to English (TFDS ``ted_hrlr_translate/pt_to_en``): small byte-level translation.

The dataset is TFDS's own: prepare it once, on a machine with network access, with
``tfds build ted_hrlr_translate/pt_to_en --data_dir=DATA --file_format=array_record`` (rfa reads it without
TensorFlow).

Run:
  rfa train --config ted_pt_en:positive --config.data_dir=DATA --workdir W
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long run. Pairs longer than ``max_length`` bytes are dropped.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "ted_pt_en",
        arg,
        max_length=200,  # bytes of source and of target
        batch_size=64,
        num_train_steps=20000,
        eval_every=2000,
        checkpoint_every=2000,
        eval_batches=20,
        **{
            "model.d_model": 128,
            "model.num_heads": 4,
            "model.mlp_dim": 512,
            "model.num_encoder_layers": 3,
            "model.num_decoder_layers": 3,
            "optimizer.label_smoothing": 0.1,
            "attention.num_features": 64,
        },
    )
