"""One Billion Word (TFDS ``lm1b``): byte-level language modelling of news sentences with the decoder-only model.

The dataset is TFDS's own: prepare it once, on a machine with network access, with
``tfds build lm1b --data_dir=DATA --file_format=array_record`` (rfa reads it without TensorFlow).

Run:
  rfa train --config lm1b:positive --config.data_dir=DATA --workdir W
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS (causal kinds: not linformer),
``:<attention>,quick`` for a seconds-long run. Sentences are packed into windows of ``max_length`` bytes.
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "lm1b",
        arg,
        max_length=256,  # bytes per packed window
        batch_size=32,
        num_train_steps=20000,
        eval_every=2000,
        checkpoint_every=2000,
        eval_batches=50,
        **{
            "model.d_model": 256,
            "model.num_heads": 4,
            "model.mlp_dim": 1024,
            "model.num_decoder_layers": 4,
            "attention.num_features": 128,
        },
    )
