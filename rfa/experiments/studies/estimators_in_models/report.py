"""The estimators-in-models study's verdicts and figures, from its rows
(:mod:`rfa.experiments.studies.estimators_in_models.measure`
measures them and writes its table)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from matplotlib.figure import Figure

from rfa.experiments.common.report import markdown_table
from rfa.experiments.common.spread import Spread, table_verdicts
from rfa.experiments.common.styles import styles


def table(rows: list[dict]) -> str:
    """Markdown of :func:`run`'s rows, then one verdict line per model and state."""
    lines = []
    for row in rows:
        lines.append(
            [
                row["model"],
                row["state"],
                row["estimator"],
                str(row["num_features"]),
                row["fit"],
                str(row["output_error"]["n"]),
                Spread(**row["output_error"]).cell("{:.3g}"),
                " / ".join(f"{Spread(**e).mean:.3g}" for e in row["layer_errors"]),
                f"{row['metric_change']['mean']:+.3f} ± {row['metric_change']['std']:.3f} ({row['metric_name']})",
                f"{row['closed_form_variance']['mean']:.3g} / {row['measured_variance']['mean']:.3g}",
            ]
        )
    header = [
        "model",
        "state",
        "estimator",
        "m",
        "fit",
        "seeds",
        "output error",
        "layer errors",
        "metric change",
        "variance: closed form / measured",
    ]
    return markdown_table(header, lines) + "\n\n" + "\n".join(verdicts(rows))


def summary(rows: list[dict]) -> str:
    """Markdown: output error at each model's largest m, one row per estimator (and fit), one column per model and
    state, mean ± standard deviation over the seeds; the lowest of each column in bold, "-" where a fit does not
    apply (per-call fits at causal sites)."""
    panels = list(dict.fromkeys((r["model"], r["state"]) for r in rows))
    largest = {panel: max(r["num_features"] for r in rows if (r["model"], r["state"]) == panel) for panel in panels}
    cells = {
        (label(r), (r["model"], r["state"])): Spread(**r["output_error"])
        for r in rows
        if r["num_features"] == largest[(r["model"], r["state"])]
    }
    lowest = {panel: min(v.mean for (_, p), v in cells.items() if p == panel) for panel in panels}
    lines = []
    for name in dict.fromkeys(name for name, _ in cells):
        line = [name]
        for panel in panels:
            spread = cells.get((name, panel))
            text = "-" if spread is None else spread.cell("{:.2f}")
            line.append(f"**{text}**" if spread is not None and spread.mean == lowest[panel] else text)
        lines.append(line)
    header = ["estimator (fit)", *(f"{model}, {state}, m = {largest[(model, state)]}" for model, state in panels)]
    return markdown_table(header, lines)


def verdicts(rows: list[dict], *, close_enough: float = 0.1) -> list[str]:
    """Per model and state, at its largest m: the estimator of the lowest output error, its difference from the next
    estimator's (paired over the seeds, 95% interval, Holm-corrected across the lines:
    :func:`rfa.experiments.common.spread.table_verdicts`), and whether it is within ``close_enough`` of softmax."""
    groups = []
    for _, group in itertools.groupby(rows, key=lambda r: (r["model"], r["state"])):
        group = list(group)
        largest = max(r["num_features"] for r in group)
        ranked = sorted((r for r in group if r["num_features"] == largest), key=lambda r: r["output_error"]["mean"])
        others = [r for r in ranked if r["estimator"] != ranked[0]["estimator"]]  # the next estimator, not a refit
        groups.append((ranked[0], others[0] if others else None))
    following = {id(best): second for best, second in groups}  # each lowest row's reference: the next estimator
    compared = table_verdicts(
        [best for best, _ in groups],
        lambda best: following[id(best)],
        lambda row: {r["seed"]: r["output_error"] for r in row["records"]},
        higher_is_better=False,
    )
    lines = []
    for (best, second), verdict in zip(groups, compared, strict=True):
        error = Spread(**best["output_error"])
        line = (
            f"- {best['model']}, {best['state']}, m = {best['num_features']}: {label(best)} has the lowest output "
            f"error, {error.cell('{:.3g}')}"
        )
        if verdict is not None:
            comparison, word = verdict
            line += (
                f"; the next estimator, {label(second)} ({Spread(**second['output_error']).cell('{:.3g}')}), is "
                f"higher by {-comparison.difference:.3g} [{-comparison.high:.3g}, {-comparison.low:.3g}]: "
                + ("separated" if word == "better" else word)
            )
        line += "." if error.mean <= close_enough else f"; no estimator is within {close_enough:g} of softmax."
        lines.append(line)
    return lines


def label(row: dict) -> str:
    """A row's estimator and, for a data-fitted one, its fit.

    Example:
      >>> label({"estimator": "oprf", "fit": "per_call"}), label({"estimator": "positive", "fit": "-"})
      ('oprf (per_call)', 'positive')
    """
    return row["estimator"] + ("" if row["fit"] == "-" else f" ({row['fit']})")


def plot(rows: list[dict], path: str) -> Figure:
    """Output error against m, one panel per (model, state), one line per (estimator, fit) with its seed range."""
    return plot_lines(rows, path, x="num_features", measure="output_error", xlabel="m")


def plot_lines(rows: list[dict], path: str, *, x: str, measure: str, xlabel: str) -> Figure:
    """``measure`` of the records against the rows' ``x``: one panel per (model, state), one line per
    :func:`label` (the same color in every panel) with the mean over the seeds and their range as a band,
    log-log."""
    panels = list(dict.fromkeys((r["model"], r["state"]) for r in rows))
    style = styles(label(r) for r in rows)  # the same in every panel and every figure
    columns = min(len(panels), 4)
    figure = Figure(figsize=(4.2 * columns + 1.6, 3.4 * math.ceil(len(panels) / columns)))
    axes = figure.subplots(math.ceil(len(panels) / columns), columns, squeeze=False).ravel()
    for axis, panel in zip(axes, panels, strict=False):
        own = [r for r in rows if (r["model"], r["state"]) == panel]
        for name in dict.fromkeys(label(r) for r in own):
            line = sorted((r for r in own if label(r) == name), key=lambda r: r[x])
            values = [[record[measure] for record in r["records"]] for r in line]
            xs = [r[x] for r in line]
            axis.plot(xs, [np.mean(v) for v in values], label=name, **style[name])
            axis.fill_between(
                xs,
                [min(v) for v in values],
                [max(v) for v in values],
                alpha=0.12,
                linewidth=0,
                color=style[name]["color"],
            )
        axis.set(
            title=f"{panel[0]}, {panel[1]}", xlabel=xlabel, ylabel=measure.replace("_", " "), xscale="log", yscale="log"
        )
        ticks = sorted({r[x] for r in own})
        axis.set_xticks(ticks, [f"{t:g}" for t in ticks], minor=False)
        axis.set_xticks([], minor=True)
        axis.grid(alpha=0.3)
    for axis in axes[len(panels) :]:
        axis.set_visible(False)
    entries = {name: handle for axis in axes for handle, name in zip(*axis.get_legend_handles_labels(), strict=True)}
    figure.legend(entries.values(), entries.keys(), loc="center right", fontsize=7)  # one legend, beside the panels
    figure.suptitle("lines: the mean over the seeds; bands: their range, lowest to highest", fontsize=9)
    figure.tight_layout(rect=(0, 0, 1 - 1.6 / figure.get_figwidth(), 1))
    figure.savefig(path, dpi=110)
    return figure
