"""Forecasting (the Transformer forecaster): the next ``horizon`` steps of a series from a lookback window.

Batches: windows of the series normalised by the training split's mean and deviation, ``inputs [B, L, C]``
(the lookback, ``L = max_length``), ``targets [B, horizon, C]``, ``weight [B]`` (:mod:`rfa.data.series`: a
split's targets lie in it, its lookbacks may reach into the past). Metrics: the squared error (the loss,
``mse``) and the absolute error (``mae``) of the normalised series.
"""

from __future__ import annotations

import jax.numpy as jnp

from rfa.data.pipeline import load_source, stream
from rfa.data.series import Windows
from rfa.models import ForecastConfig, Forecaster
from rfa.tasks.base import TaskKind, register_task_kind
from rfa.workdir import ConfigError


class Forecast(TaskKind):
    name = "forecast"
    description = "a forecaster"
    splits_sequence = False
    curves = ("loss", "mae")

    def check_task(self, task):
        if task.tokenizer is not None or task.image_shape is not None:
            raise ValueError("a forecasting task reads a series of numbers: it has no tokenizer and no image_shape.")

    def data_options(self, config):
        return {"horizon": config.model.horizon}

    def source(self, task, split, *, data_dir, max_length, horizon=None):
        if horizon is None:
            raise ValueError("a forecasting task needs the horizon: pass horizon= (config.model.horizon).")
        example = load_source(task, split, data_dir)[0]
        train_values = load_source(task, task.train_split, data_dir)[0][task.inputs]
        values = example[task.inputs]
        if max_length + horizon > len(values):
            raise ConfigError(
                f"the lookback config.max_length = {max_length} plus config.model.horizon = {horizon} is longer than "
                f"{task.dataset}'s {split} series ({len(values)} points up to its end): lower "
                "--config.max_length or --config.model.horizon."
            )
        return Windows(values, int(example["start"]), train_values, max_length, horizon)

    def examples(self, task, dataset, *, max_length):
        return stream(dataset)

    def model_config(self, config, task, attention, *, sequence_axis):
        m = config.model
        return ForecastConfig(
            lookback=config.max_length,
            horizon=m.horizon,
            channels=task.channels,
            patch_length=m.patch_length,
            d_model=m.d_model,
            num_heads=m.num_heads,
            mlp_dim=m.mlp_dim,
            num_layers=m.num_encoder_layers,
            dropout_rate=m.dropout_rate,
            positional=m.positional,
            attention=attention("encoder"),
        )

    def build_model(self, model_config, rngs):
        return Forecaster(model_config, rngs=rngs)

    def forward(self, model, batch):
        return model(batch["inputs"]), batch["targets"], batch["weight"]

    def metric_sums(self, model, batch, *, label_smoothing=0.0):
        """Summed squared (``loss``, ``nll``) and absolute errors, the forecast values counted (``weight``) and
        the lookback steps read (``tokens``)."""
        forecasts, targets, weight = self.forward(model, batch)
        errors = forecasts - targets
        weights = jnp.broadcast_to(weight[:, None, None], errors.shape)
        squared = (jnp.square(errors) * weights).sum()
        return {
            "loss": squared,
            "nll": squared,
            "absolute": (jnp.abs(errors) * weights).sum(),
            "weight": weights.sum(),
            "tokens": weight.sum() * batch["inputs"].shape[1],
        }

    def summarize(self, sums):
        weight = max(sums["weight"], 1e-9)
        return {"loss": sums["nll"] / weight, "mse": sums["nll"] / weight, "mae": sums["absolute"] / weight}


register_task_kind(Forecast())
