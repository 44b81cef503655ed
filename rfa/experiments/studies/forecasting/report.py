"""The forecasting study's table and figure, from its JSON alone (no JAX): the study writes them, and ``rfa tables``
renders them again for the results pages."""

from __future__ import annotations

from rfa.experiments.common.report import loglog_figure, markdown_table, number
from rfa.experiments.common.spread import metric, per_seed, table_verdicts


def table(results: dict) -> str:
    """Markdown: one row per kind (test MSE and MAE, mean ± standard deviation over the seeds, the MSE's difference
    from seasonal-naive's with its 95% interval and the table's Holm-corrected verdict; a one-sample test, as
    seasonal-naive has no seeds), then seasonal-naive's row."""
    naive = results["seasonal_naive"]
    compared = table_verdicts(
        results["runs"],
        lambda r: naive,
        lambda r: naive["mse"] if r is naive else per_seed(r, "mse"),
        higher_is_better=False,
    )
    rows = [
        [
            r["attention"],
            "-" if r["num_features"] is None else str(r["num_features"]),
            str(len(r["seeds"])),
            metric(r, "mse").cell("{:.4f}"),
            metric(r, "mae").cell("{:.4f}"),
            comparison.cell("{:.4f}"),
            word,
            number(r["step_time_s"], 1e3, "{:.1f}"),
            number(r["step_memory_bytes"], 2**-20, "{:.1f}"),
        ]
        for r, (comparison, word) in zip(results["runs"], compared, strict=True)
    ]
    rows.append(["seasonal naive", "-", "-", f"{naive['mse']:.4f}", f"{naive['mae']:.4f}", "-", "-", "-", "-"])
    header = [
        "attention",
        "m",
        "seeds",
        "test MSE",
        "test MAE",
        "Δ MSE vs seasonal naive [95% CI]",
        "verdict",
        "step (ms)",
        "step memory (MiB)",
    ]
    selection = results.get("selection") or {}
    candidates = [
        f"{scale or 'default'} {mse:.4f}" + (" (chosen, tested)" if scale == selection["chosen"] else "")
        for scale, mse in selection.get("candidates", {}).items()
    ]
    chosen = f"\n\nSelected on validation (mean validation MSE over kinds and seeds): {'; '.join(candidates)}."
    return markdown_table(header, rows) + (chosen if candidates else "")


def plot(results: dict, path: str) -> None:
    curves = {}
    for kind, rows in results["timing"].items():
        label = f"{kind} (slope {results['slopes'][kind]:.2f})" if results["slopes"][kind] else kind
        curves[label] = ([r["lookback"] for r in rows], [r["median_ms"] for r in rows])
    loglog_figure(
        curves,
        path,
        xlabel="lookback (steps = tokens)",
        ylabel="training step (ms)",
        title="forecaster: step time against lookback",
    )
