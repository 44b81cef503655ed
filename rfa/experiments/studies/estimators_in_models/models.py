"""The models of :mod:`rfa.experiments.studies.estimators_in_models.measure`: each gives its exact model (at
initialization
or trained), a copy with an estimator swapped in (the same weights), its attention sites' inputs and its metric.

rfa's own models (:class:`RfaModel`: the encoder, decoder LM and ViT) are built and trained by ``rfa.train``; the
Flax-example encoder (:class:`FlaxModel`) by :mod:`rfa.experiments.studies.estimators_in_models.flax_encoder`.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np
from flax import nnx

import rfa
from rfa.experiments.common.seeded import task_run_config
from rfa.experiments.studies.estimators_in_models.flax_encoder import FlaxEncoder, train_flax
from rfa.models import AttentionInputs, AttentionSite
from rfa.tasks import eval_batches, get_task, task_kind
from rfa.train import build_model, evaluate_model, load_model, train_and_evaluate


class RfaModel:
    """One of rfa's own models, built and trained by ``rfa.train`` from ``tasks/<task>.py:exact[,<scale>]``."""

    def __init__(self, study, name: str):
        self.study, self.name, self.task = study, name, get_task(study.tasks[name])
        self.forward, self.site_inputs = _jitted(self, study.tasks[name])  # compiled once per model graph

    def exact(self, state: str, seed: int, workdir: str):
        """``(model, config)``: the exact model at initialization or after its training run (read back)."""
        config = task_run_config(self.study.tasks[self.name], "exact", self.study.scale, self.study.data_dir)
        config.seed = seed
        if state == "init":
            model = build_model(config, self.task)
            model.eval()
            return model, config
        run = os.path.join(workdir, self.name, f"seed_{seed}")
        train_and_evaluate(config, run)
        model, config, _, _ = load_model(run)
        return model, config

    def swapped(self, exact, config, estimator: str, num_features: int, seed: int):
        """The model with ``estimator`` at m = ``num_features`` at every site, the exact model's weights, and
        random features drawn from ``seed``."""
        swapped_config = config.copy_and_resolve_references()
        swapped_config.attention.kind, swapped_config.attention.num_features = estimator, num_features
        swapped_config.seed = seed
        model = build_model(swapped_config, self.task)
        nnx.update(model, nnx.state(exact, nnx.Param))
        model.eval()
        return model

    def outputs(self, model, batch):
        """``(logits, weights)`` of ``batch``: the weights mark the rows that count."""
        logits, _, weights = task_kind(self.task.kind).forward(model, batch)
        return logits, weights

    def causal(self, model) -> list[bool]:
        """Whether each attention site of ``model`` is causal, in site order."""
        return [m.causal for _, m in nnx.iter_modules(model) if isinstance(m, AttentionSite)]

    def sites(self, model, batch) -> list[tuple]:
        """Each attention site's ``(q, k, v, key_mask)`` in ``model``'s pass over ``batch``, in site order."""
        paths = [path for path, m in nnx.iter_modules(model) if isinstance(m, AttentionSite)]
        _, sown = nnx.capture(self.outputs, AttentionInputs)(model, batch)
        return [functools.reduce(lambda node, key: node[key], path, sown)["inputs"][0] for path in paths]

    def metric(self, model, config) -> tuple[str, float]:
        """``(name, value)`` of the task's score on ``config.eval_batches`` test batches: perplexity where the
        task reports one (a language model), else accuracy."""
        metrics = evaluate_model(model, config)
        name = "perplexity" if "perplexity" in metrics else "accuracy"
        return name, metrics[name]


class FlaxModel(RfaModel):
    """:class:`FlaxEncoder` on its task, trained by a plain optax loop (``config.flax_steps`` AdamW steps)."""

    def _build(self, config, attention_fns, seed):
        m = config.model
        return FlaxEncoder(
            vocab_size=self.task.vocab_size,
            num_classes=self.task.num_classes,
            d_model=m.d_model,
            num_heads=m.num_heads,
            mlp_dim=m.mlp_dim,
            num_layers=m.num_encoder_layers,
            max_length=config.max_length,
            attention_fns=attention_fns,
            rngs=nnx.Rngs(seed),
        )

    def exact(self, state: str, seed: int, workdir: str):
        config = task_run_config(self.study.tasks[self.name], "exact", self.study.scale, self.study.data_dir)
        model = self._build(config, None, seed)
        if state == "trained":
            train_flax(model, config, self.study.flax_steps, seed)
        return model, config

    def swapped(self, exact, config, estimator: str, num_features: int, seed: int):
        head_dim = config.model.d_model // config.model.num_heads
        keys = jax.random.split(jax.random.key(seed), config.model.num_encoder_layers)
        fns = [rfa.make_attention_fn(estimator, num_features, head_dim=head_dim, key=key) for key in keys]
        model = self._build(config, fns, seed)
        nnx.update(model, nnx.state(exact, nnx.Param))
        return model

    def outputs(self, model, batch):
        return model(batch["inputs"]), batch["weight"]

    def causal(self, model) -> list[bool]:
        return [False] * len(model.layers)

    def sites(self, model, batch) -> list[tuple]:
        h, mask, keep = model.hidden(batch["inputs"])
        sites = []
        for layer in model.layers:
            sites.append((*layer.qkv(h), keep))
            h = layer(h, mask)
        return sites

    def metric(self, model, config) -> tuple[str, float]:
        correct = total = 0.0
        for batch in metric_batches(config):
            logits = np.asarray(self.forward(model, batch)[0])
            correct += float(((logits.argmax(-1) == batch["label"]) * batch["weight"]).sum())
            total += float(batch["weight"].sum())
        return "accuracy", correct / total


MODEL_KINDS = {"encoder": RfaModel, "decoder": RfaModel, "vit": RfaModel, "flax": FlaxModel}


_JITTED: dict[tuple[type, str], tuple] = {}


def _jitted(kind: RfaModel, task: str) -> tuple:
    """``(forward, site_inputs)``: ``kind``'s ``outputs`` and ``sites`` jitted, one pair per model class and task in
    a process. They depend on nothing else, so every state, seed and pass of the study (and of its q/k-scale sweep)
    reuses the programs that the first compiled; jitting each instance's own methods compiled them all again."""
    key = (type(kind), task)
    if key not in _JITTED:
        _JITTED[key] = nnx.jit(kind.outputs), nnx.jit(kind.sites)
    return _JITTED[key]


def metric_batches(config):
    """The first ``config.eval_batches`` batches of the config's test split."""
    return eval_batches(
        get_task(config.task),
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        split="test",
        max_batches=config.eval_batches,
    )
