"""What reports are made of: verdicts, analyses, numbers, tables, figures and JSON, for every experiment family.

A sweep's analysis returns an :class:`Analysis` (the sections of ``report.md`` and a :class:`Verdict`);
training studies and benchmarks print :func:`markdown_table` s and write :func:`write_json`; figures are
saved with :func:`save_figure` and linked with :func:`image_link`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import textwrap
from collections.abc import Callable

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from rfa.experiments.common.spread import metric, per_seed, table_verdicts
from rfa.experiments.common.styles import legend_outside, styles

# A checkout's committed results (results/ beside rfa/, three levels above this file): what `rfa tables` renders
# and the speed guard compares with.
CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
CHECKOUT_RESULTS = os.path.join(CHECKOUT, "results")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a run reproduces a published result, and the one-line evidence.

    Attributes:
      reproduced: every published value the analysis checks is matched within its tolerance.
      claim: one line naming each measured value beside the published one.

    Example:
      >>> Verdict(True, "ratio 0.432 at l = 1, 90° (published 0.43)").line("performer_fig2")
      'performer_fig2 — reproduced: ratio 0.432 at l = 1, 90° (published 0.43)'
    """

    reproduced: bool
    claim: str

    def line(self, name: str) -> str:
        """The verdict as the first line of ``name``'s report and its line in the index."""
        return f"{name} — {'reproduced' if self.reproduced else 'not reproduced'}: {self.claim}"


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What an analysis returns: the report's markdown sections and the verdict (None: nothing published to check)."""

    verdict: Verdict | None
    sections: list[str]


def fmt(value) -> str:
    """A number with 3 significant digits, '—' for a missing one.

    Example:
      >>> fmt(0.123456), fmt(None), fmt(7), fmt(False)
      ('0.123', '—', '7', '**no**')
    """
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3g}"


def number(value: float | None, scale: float, form: str) -> str:
    """``value * scale`` formatted, or "-" for a value a run did not measure.

    Example:
      >>> number(0.0123, 1e3, "{:.1f}"), number(None, 1, "{:.1f}")
      ('12.3', '-')
    """
    return "-" if value is None else form.format(value * scale)


def setting_name(attention: str, num_features: int | None, qk_map: str | None = None) -> str:
    """The key of one setting in ``rfa benchmark train_step``'s JSON: its attention, with the delta rule's estimator
    map where it has one that its variant's name does not say, and ``_m<m>`` where it takes a feature count (a table
    row's ``attention``, ``num_features`` and ``qk_map`` find it).

    Example:
      >>> setting_name("positive", 64), setting_name("elu", None), setting_name("deltanet", 16, "positive")
      ('positive_m64', 'elu', 'deltanet_positive_m16')
      >>> setting_name("gated_deltanet_positive", 16, "positive")
      'gated_deltanet_positive_m16'
    """
    name = f"{attention}_{qk_map}" if qk_map and not attention.endswith(f"_{qk_map}") else attention
    return name if num_features is None else f"{name}_m{num_features}"


STEP_TIME_HEADER = ["step (ms, side by side)", "step / exact"]
"""The cost columns of a table whose step times come from ``rfa benchmark train_step``."""
DECODE_HEADER = ["decode (µs/token, side by side)", "decode / exact"]
"""The cost columns of a decoder's table, from the same benchmark: a generated token's time."""


def cost_header(step_times: dict) -> list[str]:
    """The header of :func:`step_time_cells`: the step's columns, then the decoded token's where the benchmark timed
    the config's decoder."""
    return STEP_TIME_HEADER + (DECODE_HEADER if "seconds_per_token" in step_times else [])


def step_time_cells(row: dict, step_times: dict) -> list[str]:
    """A table row's cost cells (:func:`cost_header`) from one config of ``rfa benchmark train_step``'s JSON
    (``step_times``: its ``seconds_per_step`` and ``ratios``, and for a decoder ``seconds_per_token`` and
    ``decode_ratios``): the row's setting, found by its attention, m and estimator map (:func:`setting_name`); "-"
    where the benchmark has not timed it.

    Example:
      >>> times = {"seconds_per_step": {"positive_m64": 0.25}, "ratios": {"positive_m64_over_exact": 2.5}}
      >>> step_time_cells({"attention": "positive", "num_features": 64}, times)
      ['250.0', '2.50x']
      >>> step_time_cells({"attention": "elu", "num_features": None}, times)
      ['-', '-']
      >>> times |= {"seconds_per_token": {"positive_m64": 2e-5}, "decode_ratios": {"positive_m64_over_exact": 0.5}}
      >>> step_time_cells({"attention": "positive", "num_features": 64}, times)
      ['250.0', '2.50x', '20.0', '0.50x']
    """
    key = setting_name(row["attention"], row["num_features"], row.get("qk_map"))
    cells = [
        number(step_times["seconds_per_step"].get(key), 1e3, "{:.1f}"),
        number(step_times["ratios"].get(f"{key}_over_exact"), 1, "{:.2f}x"),
    ]
    if "seconds_per_token" in step_times:
        cells += [
            number(step_times["seconds_per_token"].get(key), 1e6, "{:.1f}"),
            number(step_times["decode_ratios"].get(f"{key}_over_exact"), 1, "{:.2f}x"),
        ]
    return cells


def select(records: list[dict], **where) -> list[dict]:
    """The records whose fields equal ``where`` (floats compared with a relative tolerance).

    Example:
      >>> select([{"m": 4, "norm": 1.0}, {"m": 8, "norm": 1.0}], m=8)
      [{'m': 8, 'norm': 1.0}]
    """

    def matches(record):
        return all(
            math.isclose(record[k], v, rel_tol=1e-6) if isinstance(v, float) else record[k] == v
            for k, v in where.items()
        )

    return [r for r in records if matches(r)]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table, numbers right-aligned; cells are already formatted strings.

    Example:
      >>> print(markdown_table(["m", "MSE"], [["4", "0.1"]]))
      | m | MSE |
      |---:|---:|
      | 4 | 0.1 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: str, data) -> None:
    """Writes ``data`` as indented JSON to ``path``, creating its directory."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def output_path(output: str | None, workdir: str, name: str) -> str:
    """Where a command writes its JSON: ``output`` if given, else ``<workdir>/<name>`` (committed results are
    written only when asked for).

    Example:
      >>> output_path(None, "workdir/train", "comparison.json"), output_path("results/x.json", "w", "c.json")
      ('workdir/train/comparison.json', 'results/x.json')
    """
    return output or os.path.join(workdir, name)


def write_report(output: str, data, text: str, plot: Callable[[str], None] | None = None) -> None:
    """Writes a study's results and says where: ``data`` as JSON at ``output``, its markdown ``text`` beside it
    (``.md``) and, given ``plot``, the figure ``plot(path)`` draws at the ``.png`` beside it.

    Example:
      >>> import tempfile
      >>> write_report(os.path.join(tempfile.mkdtemp(), "study.json"), {"rows": []}, "| a |")  # doctest: +ELLIPSIS
      wrote .../study.json
    """
    write_json(output, data)
    stem = os.path.splitext(output)[0]
    with open(stem + ".md", "w") as f:
        f.write(text + "\n")
    if plot is not None:
        plot(stem + ".png")
    print(f"wrote {output}")


def save_figure(fig, workdir: str, name: str) -> str:
    """Saves a matplotlib figure as ``<workdir>/<name>`` (PNG, 120 dpi); returns ``name``."""
    fig.savefig(os.path.join(workdir, name), dpi=120)
    return name


def image_link(name: str) -> str:
    """The markdown that shows the figure ``name`` beside the report."""
    return f"![{name}]({name})"


def log_m_axis(ax, num_features) -> None:
    """A log2 x-axis labelled with the feature counts m of a sweep."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(num_features), [str(m) for m in sorted(num_features)])
    ax.minorticks_off()
    ax.set_xlabel("m (random vectors)")


def loglog_figure(curves: dict[str, tuple[list, list]], path: str, *, xlabel: str, ylabel: str, title: str) -> Figure:
    """One log-log panel of ``{label: (xs, ys)}``, saved as a PNG at ``path``; returns the figure.

    A tick at every measured x (written ``1k``, ``2k``, ... from 1024, slanted when there are many). Each series is
    drawn in the style of the kind its label names (``"<kind> (<detail>)"``; :mod:`rfa.experiments.common.styles`, the
    same in every figure); a second series of one kind, or a name it does not know, gets a style of its own. The legend
    sits outside the data; a long title is wrapped.
    """
    figure = Figure(figsize=(6.6, 4.2))
    axis = figure.subplots()
    kinds: dict[str, str] = {}  # a label: the kind whose style it takes (its own label after the kind's first series)
    for label in curves:
        kind = label.partition(" (")[0]
        kinds[label] = label if kind in kinds.values() else kind
    look = styles(kinds.values())
    for label, (xs, ys) in curves.items():
        axis.plot(xs, ys, label=label, **look[kinds[label]])
    axis.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    axis.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
    ticks = sorted({x for xs, _ in curves.values() for x in xs})
    axis.set_xticks(ticks, [f"{x // 1024}k" if x >= 1024 and x % 1024 == 0 else f"{x:g}" for x in ticks])
    if len(ticks) > 6:
        axis.tick_params(axis="x", labelrotation=45)
    axis.xaxis.set_minor_locator(NullLocator())
    axis.grid(alpha=0.3, which="both")
    legend_outside(axis)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure


def training_table(rows: list[dict], step_times: dict | None = None) -> str:
    """Markdown of training runs over seeds (:func:`rfa.experiments.common.spread.over_seeds` rows), one row per setting
    (``rfa.experiments.studies.compare_kernels``): test metrics as mean ± standard deviation over the seeds.

    The cost columns are the runs' own step time and tokens per second, or, with ``step_times`` (one config of
    ``rfa benchmark train_step``'s JSON), the benchmark's step time of each kind and its ratio to exact attention's,
    timed side by side (:func:`step_time_cells`). The step memory is the runs' (XLA's estimate, not a timing).

    Accuracy is per token (seq2seq, lm) or per example (classification); sequence accuracy is the teacher-forced
    exact match of whole targets (seq2seq). An image model's architecture follows its task. Each row's accuracy is
    compared with the first row of the same task (exact attention by default): the difference with its 95%
    interval, paired over the seeds, and the verdict of the table's Holm-corrected tests
    (:func:`rfa.experiments.common.spread.table_verdicts`).
    """
    references, compared = _against_first(rows)
    lines = []
    for row, verdict in zip(rows, compared, strict=True):
        first = references[_task(row)]["attention"]
        lines.append(
            [
                _task(row),
                row["attention"],
                "-" if row["num_features"] is None else str(row["num_features"]),
                str(len(row["seeds"])),
                metric(row, "accuracy").cell("{:.3f}"),
                "-" if verdict is None else f"{verdict[0].cell('{:.3f}')} ({first})",
                "-" if verdict is None else verdict[1],
                *(
                    ("-" if metric(row, name) is None else metric(row, name).cell(form))
                    for name, form in (("sequence_accuracy", "{:.3f}"), ("perplexity", "{:.2f}"))
                ),
                *(
                    [number(row["step_time_s"], 1e3, "{:.1f}"), number(row["tokens_per_s"], 1e-3, "{:.0f}k")]
                    if step_times is None
                    else step_time_cells(row, step_times)
                ),
                number(row["step_memory_bytes"], 2**-20, "{:.1f}"),
            ]
        )
    header = [
        "task",
        "attention",
        "m",
        "seeds",
        "test accuracy",
        "Δ accuracy vs first [95% CI]",
        "verdict",
        "sequence accuracy",
        "perplexity",
        *(["step (ms)", "tokens/s"] if step_times is None else cost_header(step_times)),
        "step memory (MiB)",
    ]
    return markdown_table(header, lines)


def differences_figure(rows: list[dict], path: str) -> Figure:
    """The training table's comparisons as a figure: per task a panel, per kind its accuracy difference from the
    task's first kind with the 95% interval (paired over the seeds) and the table's verdict beside it; each kind in
    its own style (:mod:`rfa.experiments.common.styles`), drawn from the rows alone (the JSON)."""
    references, compared = _against_first(rows)
    tasks = list(references)
    shown = [[(row, v) for row, v in zip(rows, compared, strict=True) if v and _task(row) == task] for task in tasks]
    figure = Figure(figsize=(7.0, 0.6 + 0.3 * len(tasks) + 0.28 * sum(len(s) + 1 for s in shown)))
    axes = figure.subplots(len(tasks), 1, squeeze=False, height_ratios=[len(s) + 1 for s in shown])[:, 0]
    style = styles(row["attention"] for row in rows)
    for axis, task, points in zip(axes, tasks, shown, strict=True):
        for y, (row, (comparison, word)) in enumerate(points):
            look = style[row["attention"]]
            axis.errorbar(
                comparison.difference,
                y,
                xerr=[[comparison.difference - comparison.low], [comparison.high - comparison.difference]],
                color=look["color"],
                marker=look["marker"],
                capsize=3,
                linestyle="none",
            )
            axis.annotate(word, (1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=7)
        axis.axvline(0.0, color="black", linewidth=0.8)
        axis.set_yticks(range(len(points)), [r["attention"] for r, _ in points], fontsize=8)
        axis.set_ylim(len(points) - 0.5, -0.5)
        axis.set_title(task, fontsize=9)
        axis.set_xlabel(f"test accuracy minus {references[task]['attention']}'s (bars: 95% interval)", fontsize=8)
        axis.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))  # round steps, labels apart
        axis.tick_params(axis="x", labelsize=8)
        axis.grid(alpha=0.3, axis="x")
    figure.tight_layout(rect=(0, 0, 0.84, 1))
    figure.savefig(path, dpi=110)
    return figure


def _against_first(rows: list[dict]) -> tuple[dict[str, dict], list]:
    """Each task's first row, and every row's accuracy against its task's first (Holm across the table)."""
    references: dict[str, dict] = {}
    for row in rows:
        references.setdefault(_task(row), row)
    compared = table_verdicts(
        rows,
        lambda row: None if references[_task(row)] is row else references[_task(row)],
        lambda row: per_seed(row, "accuracy"),
        higher_is_better=True,
    )
    return references, compared


def _task(row: dict) -> str:
    return row["task"] + (f" ({row['architecture']})" if "architecture" in row else "")
