"""Length generalization: does a model with relative positions handle strings longer than any it trained on?

  python -m experiments.studies.lengths --config configs/length_generalization.py --workdir DIR

(:mod:`experiments.studies.lengths` is its command line.)

Relative positional bias in kernelized attention (Luo et al., "Stable, Fast and Accurate: Kernelized Attention
with Relative Positional Encoding", NeurIPS 2021; ``rfa.kernelized_attention(..., relative_bias=b)``) makes a
query's weights depend on ``i − j`` only, so nothing in the attention names an absolute position the model never
saw. This study asks whether that carries a trained model beyond its training lengths. Every attention kind of
``config.attention`` trains ``configs/<task>.py:<attention>[,<scale>]`` with every encoding of
``config.positional`` (``model.positional``: absolute sinusoids, rotary, or the bucketed relative bias), once per
seed of ``config.seeds``, on strings of 2-32 letters; each trained model is then rebuilt for
``config.longer_max_length`` tokens (``rfa.train.load_model(max_length=)``) and evaluated once on the test split
of ``config.longer_task`` (33-64 letters). The table gives test accuracy and teacher-forced sequence accuracy at
the training lengths and at the longer ones, mean ± standard deviation over the seeds, and compares the longer
accuracy with the first encoding's (:func:`experiments.spread.versus`). The command writes the JSON and the table
beside it (``.md``).
"""

from __future__ import annotations

import os

from experiments.report import markdown_table
from experiments.spread import Spread, metric, versus
from experiments.studies.seeded import task_run_config, train_seeds
from rfa.train import evaluate_model, load_model
from rfa.workdir import ConfigError

METRICS = ("accuracy", "sequence_accuracy")


def longer_metrics(study, workdir: str) -> dict:
    """The metrics of one trained run (``workdir``) on ``study.longer_task``'s test split (``study.longer_batches``
    batches; 0: all), at ``study.longer_max_length``."""
    model, config, _, _ = load_model(workdir, max_length=study.longer_max_length)
    config.task, config.eval_batches = study.longer_task, study.longer_batches
    return evaluate_model(model, config)


def run(study, workdir: str) -> list[dict]:
    """Trains (or reads back) every (attention, positional) setting with every seed and evaluates each run at the
    longer lengths; one row per setting: the :func:`experiments.spread.over_seeds` fields and ``longer``
    (``{metric: {"mean", "std", "n"}}``)."""
    if not study.positional:
        raise ConfigError("config.positional names no positional encoding to compare.")
    rows = []
    for attention in study.attention:
        for positional in study.positional:
            config = task_run_config(study.task, attention, study.scale, study.data_dir)
            config.model.positional = positional
            if study.longer_max_length <= config.max_length:
                raise ConfigError(
                    f"config.longer_max_length = {study.longer_max_length} must exceed the training length "
                    f"max_length = {config.max_length} of configs/{study.task}.py."
                )
            cell = os.path.join(workdir, attention, positional)
            row = train_seeds(config, cell, study.seeds)
            longer = [longer_metrics(study, os.path.join(cell, f"seed_{seed}")) for seed in study.seeds]
            row["positional"] = positional
            row["longer"] = {name: Spread.of(m[name] for m in longer).as_dict() for name in METRICS}
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown of :func:`run`'s rows, then one verdict line per attention kind: which encoding holds up longer."""
    reference = {}
    lines, verdicts = [], []
    for row in rows:
        longer = Spread(**row["longer"]["accuracy"])
        first = reference.setdefault(row["attention"], (row["positional"], longer))
        lines.append([
            row["attention"],
            row["positional"],
            str(len(row["seeds"])),
            *(metric(row, name).cell("{:.3f}") for name in METRICS),
            *(Spread(**row["longer"][name]).cell("{:.3f}") for name in METRICS),
            "-" if first[0] == row["positional"] else f"{versus(longer, first[1], higher_is_better=True)} ({first[0]})",
        ])  # fmt: skip
    for attention in reference:
        own = [row for row in rows if row["attention"] == attention]
        best = max(own, key=lambda row: row["longer"]["accuracy"]["mean"])
        ties = [row["positional"] for row in own if row is not best
                and versus(Spread(**row["longer"]["accuracy"]), Spread(**best["longer"]["accuracy"]),
                           higher_is_better=True) == "tie"]  # fmt: skip
        verdicts.append(
            f"- {attention}: {best['positional']} holds up best at the longer lengths "
            f"(accuracy {Spread(**best['longer']['accuracy']).cell('{:.3f}')})"
            + (f", tied within seed spread with {', '.join(ties)}." if ties else ", separated from the others.")
        )
    header = ["attention", "positions", "seeds", "accuracy (train lengths)", "sequence accuracy (train lengths)",
              "accuracy (longer)", "sequence accuracy (longer)", "longer accuracy vs first"]  # fmt: skip
    return markdown_table(header, lines) + "\n\n" + "\n".join(verdicts)
