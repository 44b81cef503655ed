"""What the distillation study trains and measures (:mod:`rfa.experiments.studies.distillation`: the study, its
command line and its JSON)."""

from __future__ import annotations

import functools
import json
import math
import os

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import nnx

import rfa
from rfa.configs import load_task
from rfa.experiments.common.seeded import checked_seeds
from rfa.experiments.studies.distillation.report import TEACHER, over_seeds, run_summary, score
from rfa.models import AttentionInputs, AttentionSite
from rfa.tasks import get_task, train_batches
from rfa.train import (
    evaluate_model,
    load_model,
    metric_sums,
    train_and_evaluate,
)
from rfa.workdir import write_atomic

HEDGEHOG = rfa.estimator("hedgehog")


def run_config(distill: ml_collections.ConfigDict, attention: str, **fields) -> ml_collections.ConfigDict:
    """``tasks/<task>.py:<attention>[,quick]`` with the distillation's data_dir and ``fields``."""
    config = load_task(distill.task, f"{attention},quick" if distill.quick else attention)
    config.data_dir = distill.data_dir
    for name, value in fields.items():
        config[name] = value
    return config


def sites(model: nnx.Module) -> list[AttentionSite]:
    """The model's attention sites in module order (the same order in a teacher and its student)."""
    return [module for _, module in nnx.iter_modules(model) if isinstance(module, AttentionSite)]


def attention_weights_loss(q, k, key_mask, causal: bool, weight, bias) -> jax.Array:
    """Cross-entropy of Hedgehog's linear attention weights against softmax's, on one site's q, k.

    ``q [b, Lq, h, d]``, ``k [b, Lk, h, d]``, ``key_mask [b, Lk]``; ``weight [h, 1, d, d']``, ``bias [h, 1, d']``.
    The mean over heads and over the queries that see a key of ``-Σ_j A_ij log Â_ij``.
    """
    q, k = (jnp.swapaxes(x, 1, 2).astype(jnp.float32) for x in (q, k))  # [b, h, L, d]
    allowed = key_mask[:, None, None, :]
    if causal:
        allowed = allowed & jnp.tril(jnp.ones((q.shape[2], k.shape[2]), bool))
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    allowed = jnp.broadcast_to(allowed, logits.shape)  # every (head, query) row counts once in the mean
    teacher = jax.lax.stop_gradient(jax.nn.softmax(jnp.where(allowed, logits, -jnp.inf), axis=-1))
    phi_q, phi_k = (HEDGEHOG(x, None, weight=weight[None], bias=bias[None]) for x in (q, k))
    scores = jnp.where(allowed, jnp.einsum("bhqf,bhkf->bhqk", phi_q, phi_k), 0.0)
    log_student = jnp.log(jnp.maximum(scores, 1e-30)) - jnp.log(jnp.sum(scores, axis=-1, keepdims=True))
    rows = jnp.any(allowed, axis=-1)  # queries that see a key
    cross_entropy = -jnp.sum(jnp.where(allowed, teacher * log_student, 0.0), axis=-1)
    return jnp.sum(jnp.where(rows, cross_entropy, 0.0)) / jnp.maximum(jnp.sum(rows) * 1.0, 1.0)


def distill_maps(teacher, student, config, distill, kind: str) -> list[float]:
    """Stage 1: every site's Hedgehog map trained on the teacher's attention weights; the mean loss per step."""
    teacher_sites, student_sites = sites(teacher), sites(student)
    causal = [site.causal for site in teacher_sites]

    paths = [path for path, module in nnx.iter_modules(teacher) if isinstance(module, AttentionSite)]

    @nnx.jit
    def record(teacher, batch):
        """Each site's ``(q, k, key_mask)`` of the teacher's forward pass on ``batch``, in site order."""
        _, sown = nnx.capture(functools.partial(metric_sums, kind=kind), AttentionInputs)(teacher, batch)
        return [functools.reduce(lambda node, key: node[key], path, sown)["inputs"][0] for path in paths]

    def loss(maps, inputs):
        losses = [
            attention_weights_loss(q, k, mask, c, m["weight"], m["bias"])
            for (q, k, _, mask), c, m in zip(inputs, causal, maps, strict=True)
        ]
        return sum(losses) / len(losses)

    tx = optax.adam(distill.distill_learning_rate)

    @jax.jit
    def update(maps, opt_state, inputs):
        value, grads = jax.value_and_grad(loss)(maps, inputs)
        updates, opt_state = tx.update(grads, opt_state, maps)
        return optax.apply_updates(maps, updates), opt_state, value

    maps = [{name: site.core.learned_params[name][...] for name in ("weight", "bias")} for site in student_sites]
    opt_state = tx.init(maps)
    batches = iter(
        train_batches(
            get_task(config.task),
            data_dir=config.data_dir,
            batch_size=config.batch_size,
            max_length=config.max_length,
            seed=config.seed + 7,
        )
    )
    losses = []
    for _ in range(distill.distill_steps):
        maps, opt_state, value = update(maps, opt_state, record(teacher, next(batches)))
        losses.append(float(value))
    for site, values in zip(student_sites, maps, strict=True):
        for name, value in values.items():
            site.core.learned_params[name][...] = value
    return losses


def run(distill: ml_collections.ConfigDict, workdir: str) -> dict:
    """Every seed of ``distill.seeds`` in ``<workdir>/seed_<seed>`` (:func:`run_seed`), then each run's mean ±
    standard deviation over the seeds (:func:`over_seeds`)."""
    load_task(distill.task, "exact")  # a clear error before anything trains if rfa ships no such task
    seeds = checked_seeds(distill.seeds)
    summary = {"task": distill.task, "feature_dim": distill.feature_dim}
    summary.update(over_seeds([run_seed(distill, seed, os.path.join(workdir, f"seed_{seed}")) for seed in seeds]))
    return summary


def run_seed(distill: ml_collections.ConfigDict, seed: int, workdir: str) -> dict:
    """Trains (or reads back) one seed's teacher, student and scratch runs in ``workdir``; returns their
    :func:`run_summary` rows and stage 1's first and last loss."""
    teacher_config = run_config(distill, "exact", seed=seed)
    teacher_results = train_and_evaluate(teacher_config, os.path.join(workdir, "teacher"))
    teacher, _, task, _ = load_model(os.path.join(workdir, "teacher"))
    student_config = run_config(distill, "hedgehog", seed=seed, num_train_steps=distill.finetune_steps)
    student_config.attention.num_features = distill.feature_dim
    student_config.optimizer.warmup_steps = min(student_config.optimizer.warmup_steps, distill.finetune_steps // 10)
    stage1 = {}

    def initialize(student):
        """The teacher's weights, then stage 1 (only for a new student run; a resumed one restores them)."""
        nnx.update(student, nnx.state(teacher, nnx.Param))
        stage1["losses"] = distill_maps(teacher, student, student_config, distill, task.kind)
        student.eval()
        stage1["test"] = evaluate_model(student, student_config)
        student.train()

    student_results = train_and_evaluate(student_config, os.path.join(workdir, "student"), initialize=initialize)
    stage1_path = os.path.join(workdir, "student", "stage1.json")
    if stage1:
        write_atomic(stage1_path, json.dumps(stage1, indent=1))
    with open(stage1_path) as f:
        stage1 = json.load(f)
    scratch_config = run_config(distill, "hedgehog", seed=seed)
    scratch_config.attention.num_features = distill.feature_dim
    scratch_results = train_and_evaluate(scratch_config, os.path.join(workdir, "scratch"))
    teacher_score = score(teacher_results["test"])
    rows = {
        TEACHER: (teacher_results["test"], teacher_config.num_train_steps),
        "student after stage 1 (maps distilled)": (stage1["test"], distill.distill_steps),
        "student after stage 2 (fine-tuned)": (student_results["test"], distill.distill_steps + distill.finetune_steps),
        "hedgehog from scratch": (scratch_results["test"], scratch_config.num_train_steps),
    }
    return {
        "seed": seed,
        "metric": "sequence_accuracy" if "sequence_accuracy" in teacher_results["test"] else "accuracy",
        "stage1_loss_first_last": [stage1["losses"][0], stage1["losses"][-1]],
        "runs": {name: run_summary(metrics, steps, teacher_score) for name, (metrics, steps) in rows.items()},
    }
