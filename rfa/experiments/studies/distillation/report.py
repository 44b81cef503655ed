"""The distillation study's table, from its JSON alone (no JAX): the study writes it, and ``rfa tables`` renders
it again for the results pages."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.spread import Comparison, Spread, table_verdicts

TEACHER = "teacher (exact)"


def score(metrics: dict) -> float:
    """The accuracy a run is judged by: sequence accuracy (seq2seq), else token / label accuracy."""
    return metrics.get("sequence_accuracy", metrics["accuracy"])


def run_summary(metrics: dict, steps: int, teacher_score: float) -> dict:
    """One run's row: its evaluation, steps, score and the fraction of the teacher's score it recovers."""
    recovered = score(metrics) / teacher_score if teacher_score else None
    return {
        "test": metrics,
        "steps": steps,
        "score": score(metrics),
        "accuracy": metrics["accuracy"],
        "recovered": recovered,
    }


def over_seeds(per_seed: list[dict]) -> dict:
    """The :func:`run_seed` summaries of several seeds as one: per run, its score, token accuracy and recovered
    fraction as :class:`rfa.experiments.common.spread.Spread` dicts, and its score against the teacher's — the
    difference paired over the seeds (each seed's own teacher), its 95% interval and the Holm-corrected verdict across
    the runs (:func:`rfa.experiments.common.spread.table_verdicts`); stage 1's first and last loss likewise.

    Example:
      >>> seed = lambda s, a: {"seed": s, "metric": "accuracy", "stage1_loss_first_last": [2.0, 1.0], "runs": {
      ...     TEACHER: run_summary({"accuracy": 0.8 + s / 100}, 600, 0.8),
      ...     "scratch": run_summary({"accuracy": a}, 600, 0.8)}}
      >>> summary = over_seeds([seed(0, 0.6), seed(1, 0.62), seed(2, 0.61)])
      >>> round(summary["runs"]["scratch"]["score"]["mean"], 3), summary["runs"]["scratch"]["versus_teacher"]
      (0.61, 'worse')
    """
    names = list(per_seed[0]["runs"])
    scores = {name: {seed["seed"]: seed["runs"][name]["score"] for seed in per_seed} for name in names}
    compared = table_verdicts(
        names, lambda name: None if name == TEACHER else TEACHER, scores.__getitem__, higher_is_better=True
    )
    runs = {}
    for name, verdict in zip(names, compared, strict=True):
        results = [seed["runs"][name] for seed in per_seed]
        spreads = {field: Spread.of(result[field] for result in results) for field in ("score", "accuracy")}
        recovered = [result["recovered"] for result in results]
        runs[name] = {
            "steps": results[0]["steps"],
            **{field: spread.as_dict() for field, spread in spreads.items()},
            "recovered": None if None in recovered else Spread.of(recovered).as_dict(),
            "versus_teacher": None if verdict is None else verdict[1],
            "difference_from_teacher": None if verdict is None else verdict[0].as_dict(),
        }
    losses = [seed["stage1_loss_first_last"] for seed in per_seed]
    return {
        "metric": per_seed[0]["metric"],
        "seeds": [seed["seed"] for seed in per_seed],
        "stage1_loss": {
            name: Spread.of(pair[i] for pair in losses).as_dict() for i, name in enumerate(("first", "last"))
        },
        "runs": runs,
        "per_seed": per_seed,
    }


def table(summary: dict) -> str:
    """Markdown: one row per run, mean ± standard deviation over the seeds, and its score against the teacher's
    (difference [95% interval], verdict)."""
    header = [
        "run",
        "steps",
        summary["metric"],
        "token accuracy",
        "recovered of the teacher",
        "Δ vs teacher [95% CI]",
        "verdict",
    ]
    lines = []
    for name, run in summary["runs"].items():
        recovered = "-" if run["recovered"] is None else Spread(**run["recovered"]).cell("{:.2f}")
        difference = run["difference_from_teacher"]
        lines.append(
            [
                name,
                str(run["steps"]),
                Spread(**run["score"]).cell("{:.3f}"),
                Spread(**run["accuracy"]).cell("{:.3f}"),
                recovered,
                "-" if difference is None else Comparison.from_dict(difference).cell("{:.3f}"),
                run["versus_teacher"] or "-",
            ]
        )
    return markdown_table(header, lines)
