"""What the compare_kernels study trains and measures (:mod:`rfa.experiments.studies.compare_kernels`: the study, its
command line and its JSON)."""

from __future__ import annotations

import os

import numpy as np
from matplotlib.figure import Figure

from rfa.experiments.common.seeded import train_seeds
from rfa.experiments.common.study_settings import pair_config, pairs
from rfa.experiments.common.styles import legend_outside, styles
from rfa.train import read_metrics


def run(comparison, workdir: str) -> list[dict]:
    """Trains (or reads back) every pair of ``comparison`` (``rfa/configs/studies/compare_kernels.py``) with every
    seed; one
    :func:`rfa.experiments.common.spread.over_seeds` row per pair."""
    for task, attention in sorted({tuple(pair) for pair in comparison.skip}):
        print(f"skipped: {attention} on {task} (config.skip)")
    results = []
    for task, attention in pairs(comparison):
        config = pair_config(comparison, task, attention)
        results.append(train_seeds(config, os.path.join(workdir, task, attention), comparison.seeds))
    return results


def plot_losses(comparison, workdir: str, path: str) -> Figure:
    """One panel per task: the training loss (cross-entropy) of every attention kind against the step, the mean
    over the seeds as a line and their range as a band."""
    tasks = list(comparison.tasks)
    style = styles(comparison.attention)  # one style per kind in every panel and every figure
    figure = Figure(figsize=(5.8 * len(tasks), 3.8))
    axes = figure.subplots(1, len(tasks), squeeze=False)
    for axis, task in zip(axes[0], tasks, strict=True):
        for attention in (a for t, a in pairs(comparison) if t == task):
            curves = []
            for seed in comparison.seeds:
                records = read_metrics(os.path.join(workdir, task, attention, f"seed_{seed}"))
                curves.append([(r["step"], r["loss"]) for r in records if r["split"] == "train"])
            steps = [step for step, _ in curves[0]]
            losses = np.array([[loss for _, loss in curve] for curve in curves])
            axis.plot(steps, losses.mean(axis=0), label=attention, linewidth=1.2, markevery=0.2, **style[attention])
            axis.fill_between(
                steps, losses.min(axis=0), losses.max(axis=0), color=style[attention]["color"], alpha=0.15, linewidth=0
            )
        axis.set(title=task, xlabel="step", ylabel="training loss", yscale="log")
        axis.grid(alpha=0.3)
        legend_outside(axis)  # each panel names its own kinds (a skipped pair leaves a kind out)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure
