"""Associative recall against recurrent state size: which attention kind recalls most per byte of decode state.

  rfa study recall --config recall:pairs4_l64 --workdir workdir/recall

Zoology (Arora et al., 2023) and Based (Arora et al., ICML 2024) tell linear-attention feature maps apart by
multi-query associative recall (MQAR, :mod:`rfa.data.mqar`) against the size of the recurrent state a decoder
carries. Every kind of ``config.attention`` trains ``tasks/<config.task>.py:<attention>[,<scale>]`` once per
seed of ``config.seeds``; kinds whose map takes a feature count (random features, Hedgehog, gated RFA) train at
each m of ``config.num_features`` (or of ``config.num_features_of[<attention>]``), the others (exact, elu, relu,
taylor) once; a kind in ``config.num_layers_of`` trains a decoder of that many layers (a stack pattern longer than
the task's, as Kimi Linear's 3 KDA layers to 1 exact), the others the task's. Each setting's state size is the
bytes of one layer's decode cache for one sequence at the config's length (exact attention: its keys and values,
which grow with the length; kernelized: the state ``Σ_j φ(k_j)[v_j, 1]ᵀ`` of every head, which does not), read
from the model's own ``init_cache``. Test accuracy at query positions is reported as mean ± standard deviation over
the seeds, compared with exact attention (paired over the seeds, Holm-corrected: :mod:`rfa.experiments.spread`). The
command writes the JSON, the table beside it (``.md``) and the figure (``.png``: accuracy against state bytes, log
x, one curve per kind).
"""

from __future__ import annotations

import os

import jax
from matplotlib import ticker
from matplotlib.figure import Figure

from rfa.experiments import studies
from rfa.experiments.report import cost_header, markdown_table, step_time_cells, write_report
from rfa.experiments.seeded import task_run_config, train_seeds
from rfa.experiments.spread import metric, per_seed, table_verdicts
from rfa.experiments.styles import legend_outside, styles
from rfa.tasks import get_task
from rfa.train.config import build_model
from rfa.train.results import recorded_num_features


def settings(study) -> list[tuple[str, int | None]]:
    """``(attention, m)`` of every setting: each feature count for kinds that take one, None for the others."""
    return [(attention, m) for attention in study.attention for m in feature_counts(study, attention)]


def feature_counts(study, attention: str) -> tuple:
    """The m of ``attention``'s settings: ``study.num_features_of[attention]`` where given, else
    ``study.num_features``; ``(None,)`` for a kind without a feature count."""
    if not _takes_features(study, attention):
        return (None,)
    return tuple(study.num_features_of.get(attention, study.num_features))


def _takes_features(study, attention: str) -> bool:
    return recorded_num_features(training_config(study, attention, None).attention) is not None


def training_config(study, attention: str, num_features: int | None):
    """The training config of one setting: ``tasks/<task>.py:<attention>[,<scale>]`` with m set, and the decoder's
    layer count of ``study.num_layers_of[attention]`` where given."""
    config = task_run_config(study.task, attention, study.scale, study.data_dir)
    config.model.num_decoder_layers = study.num_layers_of.get(attention, config.model.num_decoder_layers)
    if num_features is not None:
        config.attention.num_features = num_features
    return config


def state_bytes(config) -> int:
    """Bytes of one layer's decode cache for one sequence of ``config.max_length`` tokens, averaged over the layers
    (a hybrid stack's differ; shapes only: nothing is allocated). Exact attention: its keys, values and their mask;
    kernelized: the recurrent state of every head; the delta rule: its state and the convolution's last inputs; a
    sliding window: its window's keys and values."""
    model = build_model(config, get_task(config.task))
    caches = jax.eval_shape(lambda: model.init_cache(1))
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(caches)) / len(caches))


def run(study, workdir: str) -> list[dict]:
    """Trains (or reads back) every setting with every seed; one row per setting, with its state size.

    With ``study.learning_rates``, a setting's seeds train at the rate of the highest validation accuracy among
    runs with ``study.sweep_seed``, one per rate (:func:`select_rate`); the row records ``learning_rate``, ``sweep``
    (``{rate: validation accuracy}``) and ``swept_at`` (the m of the sweep). The sweep is per setting, or with
    ``study.sweep_per_kind`` once per kind, at its middle feature count, whose rate then serves every m of the kind.
    The test split is read only for the rate kept. A kind in ``study.learning_rate_of`` sweeps nothing: it trains at
    the rate given (chosen elsewhere, as by its sweep at another length), and its row records ``sweep`` ``{}`` and
    ``rate_from`` (``study.rate_from``: where the rate was chosen).
    """
    rows, chosen = [], {}
    for attention, m in settings(study):
        config = training_config(study, attention, m)
        sweep, swept_at, given = {}, m, attention in study.learning_rate_of
        if given:
            config.optimizer.learning_rate = study.learning_rate_of[attention]
        elif study.learning_rates:
            counts = feature_counts(study, attention)
            swept_at = counts[len(counts) // 2] if study.sweep_per_kind else m
            if (attention, swept_at) not in chosen:
                swept = training_config(study, attention, swept_at)
                chosen[attention, swept_at] = select_rate(
                    study, swept, os.path.join(workdir, _name(attention, swept_at))
                )
            config.optimizer.learning_rate, sweep = chosen[attention, swept_at]
        name = _name(attention, m)
        if study.learning_rates or given:
            name = os.path.join(name, _rate_dir(config.optimizer.learning_rate))
        row = train_seeds(config, os.path.join(workdir, name), study.seeds)
        rows.append(
            row
            | {
                "state_bytes": state_bytes(config),
                "length": config.max_length,
                "num_pairs": config.recall.num_pairs,
                "vocab_size": config.recall.vocab_size,
                "learning_rate": config.optimizer.learning_rate,
                "sweep": sweep,
                "swept_at": swept_at,
                **({"rate_from": study.rate_from} if given else {}),
            }
        )
    return rows


def _name(attention: str, m: int | None) -> str:
    return attention if m is None else f"{attention}_m{m}"


def _rate_dir(rate: float) -> str:
    return f"lr_{rate:g}"


def select_rate(study, config, workdir: str) -> tuple[float, dict]:
    """The learning rate of ``study.learning_rates`` whose run of ``config`` with ``study.sweep_seed`` reaches the
    highest validation accuracy (in ``<workdir>/lr_<rate>/seed_<sweep_seed>``, where the seeds of that rate train
    too), and ``{rate: validation accuracy}``."""
    sweep = {}
    for rate in study.learning_rates:
        candidate = config.copy_and_resolve_references()
        candidate.optimizer.learning_rate = rate
        row = train_seeds(candidate, os.path.join(workdir, _rate_dir(rate)), (study.sweep_seed,))
        sweep[f"{rate:g}"] = row["validation"]["accuracy"]["mean"]
    return max(study.learning_rates, key=lambda rate: sweep[f"{rate:g}"]), sweep


def table(rows: list[dict], *, verdicts: bool = True, step_times: dict | None = None) -> str:
    """Markdown: one row per setting, by kind and state size; test accuracy against exact attention's, paired over
    the seeds with the table's Holm-corrected verdicts (:func:`rfa.experiments.spread.table_verdicts`). ``verdicts``
    False (a smoke test) leaves the comparison out. With ``step_times`` (the config's entry of
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


def main(config, workdir: str, output: str) -> None:
    """Trains every setting, prints the table (a smoke test's says so and compares nothing) and writes the JSON
    at ``output``, the table and the figure beside it."""
    rows = run(config, workdir)
    text = (SMOKE_TEST + "\n\n" if config.smoke_test else "") + table(rows, verdicts=not config.smoke_test)
    print(text)
    write_report(output, rows, text, lambda path: plot(rows, path))


if __name__ == "__main__":
    studies.run("recall")
