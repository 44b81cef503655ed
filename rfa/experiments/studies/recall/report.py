"""The recall study's table and figure, from its JSON alone (no JAX): the study writes them, and ``rfa tables`` renders
them again for the results pages."""

from __future__ import annotations

from matplotlib import ticker
from matplotlib.figure import Figure

from rfa.experiments.common.report import cost_header, markdown_table, step_time_cells
from rfa.experiments.common.spread import metric, per_seed, table_verdicts
from rfa.experiments.common.styles import legend_outside, styles


def table(rows: list[dict], *, verdicts: bool = True, step_times: dict | None = None) -> str:
    """Markdown: one row per setting, by kind and state size; test accuracy against exact attention's, paired over
    the seeds with the table's Holm-corrected verdicts (:func:`rfa.experiments.common.spread.table_verdicts`).
    ``verdicts`` False (a smoke test) leaves the comparison out. With ``step_times`` (the config's entry of
    ``rfa benchmark train_step``'s JSON, which ``rfa tables`` passes), each setting's step time and its ratio to
    exact attention's, timed side by side in one process, close the row, and where the benchmark timed the decoder,
    a generated token's time and its ratio (the runs' own step times, measured at different times beside other
    jobs, stay in the JSON). A rate chosen elsewhere (``rate_from``) says where."""
    reference = next((r for r in rows if r["attention"] == "exact"), None)
    compared = table_verdicts(
        rows,
        lambda r: None if reference is None or r is reference or not verdicts else reference,
        lambda r: per_seed(r, "accuracy"),
        higher_is_better=True,
    )
    swept = any(r.get("sweep") or r.get("rate_from") for r in rows)
    lines = []
    for r, verdict in zip(rows, compared, strict=True):
        m = "-" if r["num_features"] is None else str(r["num_features"])
        comparison = [] if not verdicts else ["-", "-"] if verdict is None else [verdict[0].cell("{:.3f}"), verdict[1]]
        source = f" (from {r['rate_from']})" if r.get("rate_from") else ""
        rate = [f"{r['learning_rate']:g}{source}"] if swept else []
        lines.append(
            [
                r["attention"],
                m,
                f"{r['state_bytes'] / 1024:.1f}",
                *rate,
                str(len(r["seeds"])),
                metric(r, "accuracy").cell("{:.3f}"),
                *comparison,
                *([] if step_times is None else step_time_cells(r, step_times)),
            ]
        )
    header = [
        "attention",
        "m",
        "state per layer (KiB)",
        *(["learning rate"] if swept else []),
        "seeds",
        "test accuracy",
    ]
    header += ["Δ vs exact [95% CI]", "verdict"] if verdicts else []
    return markdown_table(header + ([] if step_times is None else cost_header(step_times)), lines)


SMOKE_TEST = (
    "Smoke test (config.smoke_test): a few steps at a tiny size, so these accuracies say only that the study runs; "
    "nothing is compared."
)


def plot(rows: list[dict], path: str) -> Figure:
    """Test accuracy (mean, bars: one standard deviation over seeds) against the state per layer in KiB, one curve
    per kind. Kinds with the same state are drawn side by side, each a few percent left or right of it (the axis is
    logarithmic), so that no series hides another."""
    figure = Figure(figsize=(7.6, 4.2))
    axis = figure.subplots()
    kinds = list(dict.fromkeys(r["attention"] for r in rows))
    style = styles(kinds)
    sharing: dict[int, list[str]] = {}  # a state size: the kinds with a point there
    for row in rows:
        beside = sharing.setdefault(row["state_bytes"], [])
        if row["attention"] not in beside:
            beside.append(row["attention"])

    def shifted(size: int, attention: str) -> float:
        beside = sharing[size]
        return size / 1024 * 1.07 ** (beside.index(attention) - (len(beside) - 1) / 2)

    for attention in kinds:
        points = sorted((r["state_bytes"], metric(r, "accuracy")) for r in rows if r["attention"] == attention)
        x = [shifted(size, attention) for size, _ in points]
        look = {**style[attention], "linestyle": style[attention]["linestyle"] if len(points) > 1 else "none"}
        axis.errorbar(
            x, [s.mean for _, s in points], yerr=[s.std for _, s in points], label=attention, capsize=3, **look
        )
    first = rows[0]
    axis.set(
        xscale="log",
        xlabel="decode state per layer (KiB, one sequence; kinds of equal state side by side)",
        ylabel="test accuracy (mean ± 1 sd over seeds)",
        title=f"MQAR: {first['num_pairs']} pairs, length {first['length']}, vocabulary {first['vocab_size']}",
        ylim=(-0.02, 1.02),
    )
    axis.xaxis.set_major_locator(ticker.LogLocator(base=2))  # 1, 2, 4, ... KiB, written as plain numbers
    axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.xaxis.set_minor_formatter(ticker.NullFormatter())
    axis.grid(alpha=0.3, which="both")
    legend_outside(axis)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure
