"""Image classification (the Vision Transformer or the Swin Transformer, by ``config.model.architecture``).

Batches: ``image [B, H, W, C]`` float32 in [0, 1] (pixels / ``task.pixel_max``), ``label [B]``,
``weight [B]``. Metrics: cross-entropy and accuracy; throughput counts pixels. The model reads whole
images, so its token sequence is not split over devices.
"""

from __future__ import annotations

import math

import numpy as np

from rfa.data.pipeline import stream
from rfa.models import Site, SwinConfig, SwinStage, SwinTransformer, VisionConfig, VisionTransformer
from rfa.tasks.base import TaskKind, register_task_kind
from rfa.tasks.common import cross_entropy_summary, cross_entropy_sums


def _vit(config, task, attention: Site) -> VisionConfig:
    m = config.model
    return VisionConfig(
        image_size=task.image_shape[:2],
        patch_size=m.patch_size,
        channels=task.image_shape[2],
        num_classes=task.num_classes,
        d_model=m.d_model,
        num_heads=m.num_heads,
        mlp_dim=m.mlp_dim,
        num_layers=m.num_encoder_layers,
        dropout_rate=m.dropout_rate,
        patch_embedding=m.patch_embedding,
        positional=m.positional,
        pooling=m.pooling,
        attention=attention,
    )


def _swin(config, task, attention: Site) -> SwinConfig:
    m = config.model
    if not len(m.swin_depths) == len(m.swin_heads) == len(m.swin_windowed):
        raise ValueError(
            f"model.swin_depths, swin_heads and swin_windowed give one value per stage; got {len(m.swin_depths)}, "
            f"{len(m.swin_heads)} and {len(m.swin_windowed)} values."
        )
    stages = tuple(
        SwinStage(depth, heads, bool(windowed), Site() if windowed else attention)  # windows are exact
        for depth, heads, windowed in zip(m.swin_depths, m.swin_heads, m.swin_windowed, strict=True)
    )
    return SwinConfig(
        image_size=task.image_shape[:2],
        patch_size=m.patch_size,
        channels=task.image_shape[2],
        num_classes=task.num_classes,
        embed_dim=m.d_model,
        window_size=m.window_size,
        stages=stages,
        mlp_ratio=max(1, m.mlp_dim // m.d_model),
        dropout_rate=m.dropout_rate,
    )


# Image models by config.model.architecture: the config they are built from (the attention of their global sites).
ARCHITECTURES = {"vit": _vit, "swin": _swin}
MODELS = {VisionConfig: VisionTransformer, SwinConfig: SwinTransformer}


class ImageClassification(TaskKind):
    name = "image_classification"
    description = "an image classifier"
    splits_sequence = False

    def check_task(self, task):
        if task.image_shape is None or task.tokenizer is not None:
            raise ValueError("an image_classification task reads pixels: it needs an image_shape and no tokenizer.")

    def examples(self, task, dataset, *, max_length):
        scale, shape = np.float32(1.0 / task.pixel_max), task.image_shape  # [H, W] images gain their channel axis
        dataset = dataset.map(
            lambda ex: {
                "image": ex[task.inputs].reshape(shape).astype(np.float32) * scale,
                "label": np.int32(ex[task.targets]),
                "weight": np.float32(1),
            }
        )
        return stream(dataset)

    def model_config(self, config, task, attention, *, sequence_axis):
        architecture = config.model.architecture
        if architecture not in ARCHITECTURES:
            raise ValueError(f"model.architecture must be one of {list(ARCHITECTURES)}, got {architecture!r}.")
        return ARCHITECTURES[architecture](config, task, attention("encoder"))

    def build_model(self, model_config, rngs):
        return MODELS[type(model_config)](model_config, rngs=rngs)

    def forward(self, model, batch):
        return model(batch["image"]), batch["label"], batch["weight"]

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        logits, labels, weights = self.forward(model, batch)
        sums, _ = cross_entropy_sums(logits, labels, weights, label_smoothing=label_smoothing)
        return sums | {"tokens": weights.sum() * math.prod(batch["image"].shape[1:3])}  # pixels that count

    def summarize(self, sums):
        return cross_entropy_summary(sums)

    def results(self, config):
        return {"architecture": config.model.architecture}


register_task_kind(ImageClassification())
