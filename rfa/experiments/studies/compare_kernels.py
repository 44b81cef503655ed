"""The kernel comparison on real tasks: train every (task, attention) pair and tabulate the results.

  rfa study compare_kernels --workdir workdir/compare_kernels
  rfa study compare_kernels --config compare_kernels:listops_cpu --config.seeds=0,1 ...

Each pair trains from ``tasks/<task>.py:<attention>[,<scale>]`` (its m replaced by ``config.num_features_of``'s,
where that names the kind) once per seed of ``config.seeds``, in
``<workdir>/<task>/<attention>/seed_<seed>`` (a finished run is read back, an interrupted one resumes; the pairs
of ``config.skip`` are left out, each with a line saying so). Then the table — task, attention, m, test accuracy /
sequence accuracy / perplexity as mean ± standard deviation over the seeds, accuracy against the task's first
kind (:func:`rfa.experiments.report.training_table`), step time, tokens/s, XLA step memory, in the order of
``config.attention`` (exact first by default) — is printed and written to ``--output`` (default
``<workdir>/compare_kernels.json``), beside it as markdown, with a PNG of each kind's accuracy difference from the
first, its 95%
interval and verdict (:func:`rfa.experiments.report.differences_figure`), and ``<stem>_loss.png``: the training loss
(mean over seeds, and its range), one panel per task. Test metrics are those of each run's final checkpoint,
evaluated once; nothing here selects by them.
"""

from __future__ import annotations

import os

import numpy as np
from matplotlib.figure import Figure

from rfa.experiments import studies
from rfa.experiments.report import differences_figure, training_table, write_report
from rfa.experiments.seeded import task_run_config, train_seeds
from rfa.experiments.styles import legend_outside, styles
from rfa.train import read_metrics


def pairs(comparison) -> list[tuple[str, str]]:
    """The (task, attention) pairs to train: every task with every attention, less ``comparison.skip``."""
    skip = {tuple(pair) for pair in comparison.skip}
    return [
        (task, attention)
        for task in comparison.tasks
        for attention in comparison.attention
        if (task, attention) not in skip
    ]


def run(comparison, workdir: str) -> list[dict]:
    """Trains (or reads back) every pair of ``comparison`` (``rfa/configs/studies/compare_kernels.py``) with every
    seed; one
    :func:`rfa.experiments.spread.over_seeds` row per pair."""
    for task, attention in sorted({tuple(pair) for pair in comparison.skip}):
        print(f"skipped: {attention} on {task} (config.skip)")
    results = []
    for task, attention in pairs(comparison):
        config = task_run_config(task, attention, comparison.scale, comparison.data_dir)
        config.attention.num_features = comparison.num_features_of.get(attention, config.attention.num_features)
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


def main(config, workdir: str, output: str) -> None:
    """Trains every pair, prints the table and writes the JSON at ``output``, the table, the differences figure and
    the loss curves (``<stem>_loss.png``) beside it."""
    results = run(config, workdir)
    text = training_table(results)
    print(text)
    write_report(output, results, text, lambda path: differences_figure(results, path))
    plot_losses(config, workdir, os.path.splitext(output)[0] + "_loss.png")


if __name__ == "__main__":
    studies.run("compare_kernels")
