"""The kernel comparison on real tasks: train every (task, attention) pair and tabulate the results.

  python -m experiments.studies.compare_kernels --config configs/compare_kernels.py --workdir workdir/train
  python -m experiments.studies.compare_kernels --config configs/compare_kernels.py --config.tasks=sort,listops ...

Each pair trains from ``configs/<task>.py:<attention>[,<scale>]`` in ``<workdir>/<task>/<attention>`` (a
finished pair is read back, an interrupted one resumes; the pairs of ``config.skip`` are left
out, each with a line saying so), then the table — task, attention, m,
final accuracy / perplexity, step time, tokens/s, XLA step memory, in the order of
``config.attention`` (exact first by default) — is printed and written to ``<workdir>/comparison.json`` (or
``--output``), beside it as markdown, and with a PNG of every run's training loss, one panel per task.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

from absl import flags
from matplotlib.figure import Figure
from ml_collections import config_flags

from experiments.cli import run_main, run_training, shipped_config
from experiments.report import output_path, training_table, write_json
from rfa.train import read_metrics, train_and_evaluate
from rfa.workdir import ConfigError

_CONFIG = config_flags.DEFINE_config_file("config", shipped_config("compare_kernels.py"), "Which tasks and kinds.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/train", "Parent of the per-(task, attention) workdirs.")
_OUTPUT = flags.DEFINE_string(
    "output", None, "JSON of the table (.md and .png beside); default <workdir>/comparison.json."
)


def pairs(comparison) -> list[tuple[str, str]]:
    """The (task, attention) pairs to train: every task with every attention, less ``comparison.skip``."""
    skip = {tuple(pair) for pair in comparison.skip}
    return [(task, attention) for task in comparison.tasks for attention in comparison.attention
            if (task, attention) not in skip]  # fmt: skip


def run(comparison, workdir: str) -> list[dict]:
    """Trains (or reads back) every pair of ``comparison`` (``configs/compare_kernels.py``); their results."""
    for task, attention in sorted({tuple(pair) for pair in comparison.skip}):
        print(f"skipped: {attention} on {task} (config.skip)")
    results = []
    for task, attention in pairs(comparison):
        if importlib.util.find_spec(f"configs.{task}") is None:
            raise ConfigError(f"config.tasks names {task!r}, which has no configs/{task}.py.")
        config = importlib.import_module(f"configs.{task}").get_config(
            f"{attention},{comparison.scale}" if comparison.scale else attention
        )
        config.data_dir = comparison.data_dir
        results.append(train_and_evaluate(config, os.path.join(workdir, task, attention)))
    return results


def plot_losses(comparison, workdir: str, path: str) -> None:
    """One panel per task: the training loss (cross-entropy) of every attention kind against the step."""
    tasks = list(comparison.tasks)
    figure = Figure(figsize=(4.6 * len(tasks), 3.6))
    axes = figure.subplots(1, len(tasks), squeeze=False)
    for axis, task in zip(axes[0], tasks, strict=True):
        for attention in (a for t, a in pairs(comparison) if t == task):
            records = read_metrics(os.path.join(workdir, task, attention))
            points = [(r["step"], r["loss"]) for r in records if r["split"] == "train"]
            color = f"C{list(comparison.attention).index(attention) % 10}"  # one color per kind in every panel
            axis.plot(*zip(*points, strict=True), label=attention, color=color, linewidth=1.2)
        axis.set(title=task, xlabel="step", ylabel="training loss", yscale="log")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)  # each panel names its own kinds (a skipped pair leaves a kind out)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv):
    del argv
    results = run_training(run, _CONFIG.value, _WORKDIR.value)
    text = training_table(results)
    print(text)
    output = output_path(_OUTPUT.value, _WORKDIR.value, "comparison.json")
    write_json(output, results)
    stem = os.path.splitext(output)[0]
    with open(stem + ".md", "w") as f:
        f.write(text + "\n")
    plot_losses(_CONFIG.value, _WORKDIR.value, stem + ".png")
    print(f"wrote {output}")


if __name__ == "__main__":
    run_main(main)
