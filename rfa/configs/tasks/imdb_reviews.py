"""IMDb reviews (TFDS ``imdb_reviews``): sentiment classification of byte-level movie reviews (LRA's text task).

The dataset is TFDS's own: prepare it once, on a machine with network access, with
``tfds build imdb_reviews --data_dir=DATA --file_format=array_record`` (rfa reads it without TensorFlow).

Run:
  rfa train --config imdb_reviews:positive --config.data_dir=DATA --workdir W
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS, ``:<attention>,quick`` for a
seconds-long run. Reviews are truncated to ``max_length`` = 1000 bytes (LRA's text task uses 1000-4000).
"""

from rfa.configs.common import task_config


def get_config(arg: str | None = None):
    return task_config(
        "imdb_reviews",
        arg,
        max_length=1000,  # bytes per review (truncated)
        batch_size=32,
        num_train_steps=5000,
        eval_every=1000,
        checkpoint_every=1000,
        eval_batches=0,  # the whole validation split (and, at the end, the whole test split)
        **{"model.num_encoder_layers": 2, "model.pooling": "mean"},
    )
