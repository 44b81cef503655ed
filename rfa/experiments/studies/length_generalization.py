"""Length generalization: does a model with relative positions handle strings longer than any it trained on?

  rfa study length_generalization --workdir workdir/length_generalization

Relative positional bias in kernelized attention (Luo et al., "Stable, Fast and Accurate: Kernelized Attention
with Relative Positional Encoding", NeurIPS 2021; ``rfa.kernelized_attention(..., relative_bias=b)``) makes a
query's weights depend on ``i − j`` only, so nothing in the attention names an absolute position the model never
saw. This study asks whether that carries a trained model beyond its training lengths. Every attention kind of
``config.attention`` trains ``tasks/<task>.py:<attention>[,<scale>]`` with every encoding of
``config.positional`` (``model.positional``: absolute sinusoids, rotary, or the bucketed relative bias), once per
seed of ``config.seeds``, on strings of 2-32 letters; each trained model is then rebuilt for
``config.longer_max_length`` tokens (``rfa.train.load_model(max_length=)``) and evaluated once on the test split
of ``config.longer_task`` (33-64 letters). The table gives test accuracy and teacher-forced sequence accuracy at
the training lengths and at the longer ones, mean ± standard deviation over the seeds, and compares the longer
accuracy with the first encoding's (paired over the seeds, Holm-corrected: :mod:`rfa.experiments.spread`). Two rules
that learn nothing give the floors the longer accuracies are read against: repeating the previous symbol (sorted
strings repeat letters often) and the majority symbol. The command writes the JSON and the table beside it
(``.md``).
"""

from __future__ import annotations

import os

import numpy as np

from rfa.data.tokenizers import BOS_ID, PAD_ID
from rfa.experiments import studies
from rfa.experiments.report import markdown_table, write_report
from rfa.experiments.seeded import task_run_config, train_seeds
from rfa.experiments.spread import Spread, metric, table_verdicts
from rfa.tasks import eval_batches, get_task
from rfa.train import evaluate_model, load_model
from rfa.workdir import ConfigError

METRICS = ("accuracy", "sequence_accuracy")


def longer_metrics(study, workdir: str) -> dict:
    """The metrics of one trained run (``workdir``) on ``study.longer_task``'s test split (``study.longer_batches``
    batches; 0: all), at ``study.longer_max_length``."""
    model, config, _, _ = load_model(workdir, max_length=study.longer_max_length)
    config.task, config.eval_batches = study.longer_task, study.longer_batches
    return evaluate_model(model, config)


def floors(study, batch_size: int) -> dict:
    """What two rules that learn nothing about sorting score on the longer test split, teacher-forced as the models
    are: ``"repeat the previous symbol"`` (predict the decoder's input token, so the first is always wrong) and
    ``"the majority symbol"`` (the split's most frequent target token, an optimistic floor: it is chosen on the
    split itself). ``{rule: {"accuracy", "sequence_accuracy"}}``, over the examples the models are evaluated on
    (``study.longer_batches`` batches of ``batch_size``; 0: all), per target token, EOS included, as the models'.

    Example:
      >>> floors(study, 32)["repeat the previous symbol"]["accuracy"]  # doctest: +SKIP
      0.672
    """
    task = get_task(study.longer_task)
    batches = eval_batches(
        task,
        data_dir=study.data_dir,
        batch_size=batch_size,
        max_length=study.longer_max_length,
        split=task.test_split,
        max_batches=study.longer_batches or None,
    )
    targets = np.concatenate([np.asarray(batch["targets"]) for batch in batches])
    targets = targets[(targets != PAD_ID).any(-1)]
    weights = targets != PAD_ID
    previous = np.concatenate([np.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)
    symbols, counts = np.unique(targets[weights], return_counts=True)
    predictions = {
        "repeat the previous symbol": previous,
        "the majority symbol": np.full_like(targets, symbols[counts.argmax()]),
    }
    return {
        rule: {
            "accuracy": float((predicted == targets)[weights].mean()),
            "sequence_accuracy": float(((predicted == targets) | ~weights).all(-1).mean()),
        }
        for rule, predicted in predictions.items()
    }


def run(study, workdir: str) -> dict:
    """Trains (or reads back) every (attention, positional) setting with every seed and evaluates each run at the
    longer lengths. Returns ``{"rows", "floors"}``: one row per setting — the :func:`rfa.experiments.spread.over_seeds`
    fields, ``longer`` (``{metric: {"mean", "std", "n"}}``) and ``longer_runs`` (each seed's ``{"seed", metric:
    value}``) — and the :func:`floors` of the longer split."""
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
            row["longer_runs"] = [
                {"seed": seed, **{name: m[name] for name in METRICS}}
                for seed, m in zip(study.seeds, longer, strict=True)
            ]
            rows.append(row)
    return {"rows": rows, "floors": floors(study, config.batch_size)}


def table(results: dict) -> str:
    """Markdown of :func:`run`'s rows and floors: each setting's accuracies at the training and the longer lengths,
    and its longer accuracy against the first encoding of its kind (paired over the seeds, 95% interval, the
    table's Holm-corrected verdict: :func:`rfa.experiments.spread.table_verdicts`); then the floors' rows."""
    rows = results["rows"]
    first = {}
    for row in rows:
        first.setdefault(row["attention"], row)
    compared = table_verdicts(
        rows,
        lambda row: None if first[row["attention"]] is row else first[row["attention"]],
        lambda row: {run["seed"]: run["accuracy"] for run in row["longer_runs"]},
        higher_is_better=True,
    )
    lines = []
    for row, verdict in zip(rows, compared, strict=True):
        lines.append(
            [
                row["attention"],
                row["positional"],
                str(len(row["seeds"])),
                *(metric(row, name).cell("{:.3f}") for name in METRICS),
                *(Spread(**row["longer"][name]).cell("{:.3f}") for name in METRICS),
                "-" if verdict is None else f"{verdict[0].cell('{:.3f}')} ({first[row['attention']]['positional']})",
                "-" if verdict is None else verdict[1],
            ]
        )
    for rule, values in results["floors"].items():
        lines.append([f"floor: {rule}", "-", "-", "-", "-", *(f"{values[name]:.3f}" for name in METRICS), "-", "-"])
    header = [
        "attention",
        "positions",
        "seeds",
        "accuracy (train lengths)",
        "sequence accuracy (train lengths)",
        "accuracy (longer)",
        "sequence accuracy (longer)",
        "Δ longer accuracy vs first [95% CI]",
        "verdict",
    ]
    return markdown_table(header, lines)


def main(config, workdir: str, output: str) -> None:
    """Trains every setting, prints the table and writes the JSON at ``output``, the table beside it."""
    results = run(config, workdir)
    text = table(results)
    print(text)
    write_report(output, results, text)


if __name__ == "__main__":
    studies.run("length_generalization")
