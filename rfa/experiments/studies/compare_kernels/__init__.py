"""The kernel comparison on real tasks: train every (task, attention) pair and tabulate the results.

  rfa study compare_kernels --workdir workdir/compare_kernels
  rfa study compare_kernels --config compare_kernels:listops_cpu --config.seeds=0,1 ...

Each pair trains from ``tasks/<task>.py:<attention>[,<scale>]`` (its m replaced by ``config.num_features_of``'s,
where that names the kind) once per seed of ``config.seeds``, in
``<workdir>/<task>/<attention>/seed_<seed>`` (a finished run is read back, an interrupted one resumes; the pairs
of ``config.skip`` are left out, each with a line saying so). Then the table — task, attention, m, test accuracy /
sequence accuracy / perplexity as mean ± standard deviation over the seeds, accuracy against the task's first
kind (:func:`rfa.experiments.common.report.training_table`), step time, tokens/s, XLA step memory, in the order of
``config.attention`` (exact first by default) — is printed and written to ``--output`` (default
``<workdir>/compare_kernels.json``), beside it as markdown, with a PNG of each kind's accuracy difference from the
first, its 95%
interval and verdict (:func:`rfa.experiments.common.report.differences_figure`), and ``<stem>_loss.png``: the training
loss (mean over seeds, and its range), one panel per task. Test metrics are those of each run's final checkpoint,
evaluated once; nothing here selects by them.
"""

from __future__ import annotations

import os

from rfa.experiments.common.report import differences_figure, training_table, write_report
from rfa.experiments.studies.compare_kernels.measure import plot_losses, run


def main(config, workdir: str, output: str) -> None:
    """Trains every pair, prints the table and writes the JSON at ``output``, the table, the differences figure and
    the loss curves (``<stem>_loss.png``) beside it."""
    results = run(config, workdir)
    text = training_table(results)
    print(text)
    write_report(output, results, text, lambda path: differences_figure(results, path))
    plot_losses(config, workdir, os.path.splitext(output)[0] + "_loss.png")
