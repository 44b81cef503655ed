"""The forecasting comparison: each attention kind against seasonal-naive, and step time against the lookback.

  rfa study forecasting --workdir workdir/forecasting

1. Every attention kind of the config trains ``tasks/<task>.py:<attention>`` once per seed of ``config.seeds`` in
   ``<workdir>/<attention>/seed_<seed>`` (a finished run is read back; with ``config.candidates``, at every
   candidate scale, of which the one with the lowest validation MSE is kept: :func:`select`) and is scored once, at
   the end, on the task's test years by MSE and MAE of the series normalised by the training years' statistics (mean
   ± standard deviation over the seeds); the seasonal-naive forecast (the last observed season repeated,
   :func:`rfa.data.series.seasonal_naive`) is scored on the same windows, and the table gives each kind's MSE
   difference from it with its 95% interval and the Holm-corrected verdict (:mod:`rfa.experiments.spread`).
2. One training step of the forecaster (patches of one step: a token per step) is compiled and timed at
   each lookback for the config's timing kinds; the log-log slopes say how the step grows with the lookback.

The command writes the results (JSON), the table beside them (``.md``) and the step-time figure (``.png``;
none when ``config.lookbacks`` is empty).
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from rfa.configs import load_task
from rfa.data.series import seasonal_naive
from rfa.experiments import studies
from rfa.experiments.benchmarks.common import environment, loglog_figure, memory_bytes, slope, timing_summary
from rfa.experiments.report import markdown_table, number, write_report
from rfa.experiments.seeded import train_seeds
from rfa.experiments.spread import metric, per_seed, table_verdicts
from rfa.tasks import eval_batches, get_task
from rfa.train.config import build_model


def task_config(comparison, attention: str, scale: str | None = None):
    """The training config of ``tasks/<task>.py:<attention>[,<scale>]`` (default scale: ``comparison.scale``; a
    clear error if there is none)."""
    scale = comparison.scale if scale is None else scale
    config = load_task(comparison.task, f"{attention},{scale}" if scale else attention)
    config.data_dir = comparison.data_dir
    return config


def select(comparison, workdir: str) -> tuple[str, list[dict], dict]:
    """Trains every kind and seed at each candidate scale of ``comparison.candidates`` (in
    ``<workdir>/<candidate>/<attention>``) and keeps the candidate with the lowest validation MSE, averaged over
    kinds and seeds. Every run scores its test years once, at its end, as every training run does; the study
    reports them only for the candidate kept. Without candidates, ``comparison.scale`` trains in
    ``<workdir>/<attention>`` and nothing is selected.

    Returns:
      the chosen scale, its :func:`rfa.experiments.spread.over_seeds` rows, and ``{"metric", "candidates": {scale:
      mean validation MSE}, "chosen"}`` (empty without candidates).
    """
    if not comparison.candidates:
        rows = [
            train_seeds(task_config(comparison, a), os.path.join(workdir, a), comparison.seeds)
            for a in comparison.attention
        ]
        return comparison.scale, rows, {}
    trained = {
        scale: [
            train_seeds(
                task_config(comparison, a, scale), os.path.join(workdir, scale or "default", a), comparison.seeds
            )
            for a in comparison.attention
        ]
        for scale in comparison.candidates
    }
    validation = {
        scale: float(np.mean([r["validation"]["mse"]["mean"] for r in rows])) for scale, rows in trained.items()
    }
    chosen = min(validation, key=validation.get)
    return chosen, trained[chosen], {"metric": "validation mse", "candidates": validation, "chosen": chosen}


def seasonal_naive_scores(config) -> dict:
    """MSE and MAE of the seasonal-naive forecast on the test windows the runs are scored on."""
    task = get_task(config.task)
    squared = absolute = count = 0.0
    batches = eval_batches(
        task,
        data_dir=config.data_dir,
        batch_size=config.batch_size,
        max_length=config.max_length,
        split=task.test_split,
        horizon=config.model.horizon,
    )
    for batch in batches:
        errors = seasonal_naive(batch["inputs"], config.model.horizon, task.season) - batch["targets"]
        weights = np.broadcast_to(batch["weight"][:, None, None], errors.shape)
        squared, absolute = (
            squared + float((errors**2 * weights).sum()),
            absolute + float((np.abs(errors) * weights).sum()),
        )
        count += float(weights.sum())
    return {"mse": squared / count, "mae": absolute / count}


def step_time(config, lookback: int, repeats: int) -> dict:
    """One compiled training step of the forecaster at ``lookback`` (a token per step): time and memory."""
    config = config.copy_and_resolve_references()
    config.max_length, config.model.patch_length = lookback, 1
    model = build_model(config, get_task(config.task))
    graphdef, state = nnx.split((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)))
    x = jax.random.normal(jax.random.key(lookback), (config.batch_size, lookback, 1))
    y = jax.random.normal(jax.random.key(1), (config.batch_size, config.model.horizon, 1))

    def step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    compiled = jax.jit(step, donate_argnums=0).lower(state, x, y).compile()
    state, loss = compiled(state, x, y)  # warm-up
    jax.block_until_ready(loss)
    seconds = []
    for _ in range(repeats):  # the state is donated: each step takes the previous one's
        start = time.perf_counter()
        state, loss = compiled(state, x, y)
        jax.block_until_ready(loss)
        seconds.append(time.perf_counter() - start)
    return {"lookback": lookback, "memory": memory_bytes(compiled), **timing_summary(seconds)}


def run(comparison, workdir: str) -> dict:
    """Trains (or reads back) every kind, scores seasonal-naive, times the steps; the results."""
    scale, runs, selection = select(comparison, workdir)
    naive = seasonal_naive_scores(task_config(comparison, comparison.attention[0], scale))
    timing = {
        kind: [
            step_time(task_config(comparison, kind), lookback, comparison.repeats) for lookback in comparison.lookbacks
        ]
        for kind in (comparison.timing_kinds if comparison.lookbacks else ())
    }
    slopes = {kind: slope([(r["lookback"], r["median_ms"]) for r in rows]) for kind, rows in timing.items()}
    return {"runs": runs, "selection": selection, "seasonal_naive": naive, "timing": timing, "slopes": slopes}


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


def main(config, workdir: str, output: str) -> None:
    """Trains and times every kind, prints the table and the slopes, and writes the JSON at ``output``, the table
    and the step-time figure beside it."""
    results = run(config, workdir)
    results["environment"] = environment()
    text = table(results)
    print(text)
    for kind, value in results["slopes"].items():
        print(f"step time against lookback, {kind}: slope {value}")
    write_report(output, results, text, (lambda path: plot(results, path)) if results["timing"] else None)


if __name__ == "__main__":
    studies.run("forecasting")
