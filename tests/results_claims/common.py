"""What the page modules share: the :class:`Claim`, the readers of ``results/*.json`` and of the rendered tables,
the vocabularies that hold on every page, and the names and helpers of the results that more than one page module
quotes.

This is the only module of the claims that imports rfa's own modules (``rfa.experiments.tables``,
``rfa.experiments.report``, ``rfa.experiments.spread``, ``rfa.configs.studies.recall``): the page modules take what
they need of them from here, so a move of those modules is fixed in one place.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path

from rfa.configs.studies.recall import get_config as recall_study_config  # noqa: F401 (for the page modules)
from rfa.experiments import tables
from rfa.experiments.common.report import setting_name  # noqa: F401 (for the page modules)
from rfa.experiments.common.spread import Spread, compare, per_seed, verdicts  # noqa: F401 (for the page modules)

RESULTS = Path(__file__).resolve().parents[2] / "results"


@dataclasses.dataclass(frozen=True)
class Claim:
    page: str
    text: str
    values: Callable[[], tuple] = tuple
    holds: Callable[[], bool] = lambda: True

    def sentence(self) -> str:
        return self.text.format(*self.values())


@functools.cache
def data(name: str):
    return json.loads((RESULTS / f"{name}.json").read_text())


@functools.cache
def table(key: str) -> list[dict]:
    """The rows of the rendered table ``key`` (``rfa.experiments.tables``), as ``{column: cell}``."""
    lines = [line for line in tables.render(key).splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


def cell(key: str, column: str, **where) -> str:
    """The cell of ``column`` in the one row of table ``key`` whose cells equal ``where``."""
    rows = [row for row in table(key) if all(row[k] == str(v) for k, v in where.items())]
    assert len(rows) == 1, f"{key}: {len(rows)} rows match {where}"
    return rows[0][column]


def delta(key: str, **where) -> str:
    """The difference and interval of a row against its reference, without the reference's name."""
    text = next(row for column, row in _columns(key, **where).items() if column.startswith("Δ"))
    return text.split(" (")[0]


def _columns(key: str, **where) -> dict:
    rows = [row for row in table(key) if all(row[k] == str(v) for k, v in where.items())]
    assert len(rows) == 1, f"{key}: {len(rows)} rows match {where}"
    return rows[0]


def runs(name: str, attention: str) -> dict:
    """``{seed: test metrics}`` of one kind of a seeded training table."""
    row = next(r for r in data(name) if r["attention"] == attention)
    return {run["seed"]: run["test"] for run in row["runs"]}


def spread(value: dict, form: str = "{:.3f}") -> str:
    return Spread(**value).cell(form)


def span(values, form: str = "{:.3f}") -> str:
    """``lo–hi`` of ``values`` in ``form``."""
    values = sorted(values)
    return f"{form.format(values[0])}–{form.format(values[-1])}"


def table_verdicts(key: str) -> dict[str, str]:
    return {row["attention"]: row["verdict"] for row in table(key)}


# The vocabularies of every page.
README = "../../README.md"  # claims name their page relative to docs/results

PAGES = (*sorted(p.name for p in (RESULTS.parent / "docs" / "results").glob("*.md")), README)
"""Every page the claims hold: the results pages and the README."""

NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
"""A number as prose writes it: 40, 0.7 (of 0.7%), 8 (of 8× or 30–60x), 1 and 33 (of 1/33), 16,384."""

ORDER = re.compile(
    r"(?<![-\w])(?:tied?|ties|level|behind|as well|above|below|ahead|same|better|worse|beats?|outperforms?|equals?)\b",
    re.IGNORECASE,
)
"""Words that order or equate results: a page may use them only inside a claim whose predicate checks them."""

NOT_AN_ORDER = re.compile(
    r"\b(?:table|tables|figure|figures|section|one|ones|run|runs|rows?|model|fix|study|benchmark|bullets?|layer|timing|commands|"
    r"numbers?|"
    r"setting|schedule) "
    r"(?:above|below)\b|[(\[](?:above|below)\b"  # the page's layout: the table above, (below)
    r"|\bthe same\s+(?:lines|config|configs|seeds?|weights|code|settings|flags|machine|way|shapes|command|model|"
    r"arguments|windows|test years|inputs|small tasks|generator|function|program|process|measure|name|bias|core|"
    r"range|load)\b"
    r"|\bahead of time\b|\bat equal m\b"  # the setup: compiled ahead of time, estimators at equal m
)
"""Words of :data:`ORDER` that order or equate no result: a place on the page, or a setup shared by the runs."""

_PROTOCOL = (
    "steps?|heads?|layers?|seeds?|tokens?|images?|expressions?|strings?|letters?|windows?|bytes|positions?|"
    "years|weeks|processes|ids|keys|values|sequences|coordinates|blocks?|patches|pixels|epochs?|cores?|calls|repetitions|features|pairs|comparisons|channels|classes|"
    "angles|lengths|sites|buckets|queries|devices|rounds|chunks?"
)

NOT_A_RESULT = re.compile(
    r"\b(?:m|L|d|d'|k|s|w|R|B|H|C|F|P|c|n|K|l|r) [=≤] \d+(?:\.\d+)?"  # a setting: m = 16, L = 4096, s = 0.5
    r"|∈ \{[^}]*\}"  # a set of settings: s ∈ {0.5, 1, 1.5}
    r"|\d+(?:×\d+)+"  # a shape: 4×4 windows
    r"|95% (?:interval|CI)"  # the rule's level
    r"|(?<![\w.])\d+(?:–\d+)?[- ](?:" + _PROTOCOL + r")\b"  # a count of the protocol: 300 steps, 2-layer
    r"|\b(?:width|d_model|head_dim|MLP|batch|seeds?) \d+(?:–\d+)?"  # a size of the model: width 64, seeds 0–2
    r"|\b\de-\d\b"  # a learning rate: 3e-3
    r"|\b\d+\.\d+\.\d+\b"  # a version: 0.2.0
    r"|\b1[6-9]\d\d[–-](?:1[6-9]|20)\d\d\b"  # a span of years: 1700–1915
    r"|(?:et al\.,?|NeurIPS|ICML|ICLR|Fig\.|Figure|Thm|Theorem|Lemma) \d+"  # a citation
    r"|\belu\+1|\bO\([^)]*\)|\bN\(0, 1\)"  # a name, an order of growth, a distribution
)
"""Numbers that state no result, wherever they stand; anything else of the setup goes in :data:`SETUP`."""


# The results that more than one page module quotes: the training tables.
SORT, LISTOPS, PYTHON = "train_cpu_sort_seeded", "train_cpu_listops_cpu_seeded", "train_cpu_python_source_seeded"

VISION = "train_cpu_vision_seeded"

TRAIN_STEP = tables.TRAIN_STEP  # rfa benchmark train_step: every kind's step timed side by side

SOFTMAX_KINDS = ("positive", "positive_iid", "simplex_positive", "hyperbolic", "oprf", "saderf")


def runs_mean(name: str, attention: str) -> float:
    return next(r for r in data(name) if r["attention"] == attention)["test"]["accuracy"]["mean"]


# The estimators in models, and forecasting.
EIM = "estimators_in_models_cpu"


def lowest_error(model: str, state: str) -> dict:
    return min(
        (r for r in data(EIM) if (r["model"], r["state"], r["num_features"]) == (model, state, 256)),
        key=lambda r: r["output_error"]["mean"],
    )


PANELS = [(m, s) for m in ("encoder", "decoder", "vit", "flax") for s in ("init", "trained")]

CO2 = "forecast_co2_cpu"


def co2_every_kind_better() -> bool:
    return {row["verdict"] for row in table(CO2)} == {"better", "-"}


# The recall tables.
RECALL = "recall_cpu"


def recall(attention: str, m: int | None = None, name: str = RECALL) -> dict:
    return next(r for r in data(name) if (r["attention"], r["num_features"]) == (attention, m))


def recall_accuracy(attention: str, m: int | None = None) -> float:
    return recall(attention, m)["test"]["accuracy"]["mean"]


def state_kib(attention: str, m: int | None = None, name: str = RECALL) -> str:
    return f"{recall(attention, m, name)['state_bytes'] / 1024:.1f}"


def sweep(row: dict, *rates: str) -> tuple[str, ...]:
    """The validation accuracies of a row's learning-rate sweep at ``rates`` (as the JSON keys them: ``"0.001"``)."""
    return tuple(f"{row['sweep'][rate]:.3f}" for rate in rates)


PAIRS4 = "recall_pairs4_l64_cpu"

pairs4 = functools.partial(recall, name=PAIRS4)

pairs4_kib = functools.partial(state_kib, name=PAIRS4)

KERNELIZED = "gated_deltanet_positive"


def seed_accuracies(row: dict) -> list[float]:
    return [run["test"]["accuracy"] for run in sorted(row["runs"], key=lambda r: r["seed"])]


def seed_cells(row: dict) -> tuple[str, ...]:
    return tuple(f"{accuracy:.3f}" for accuracy in seed_accuracies(row))


def hedgehog_recalls_on_one_seed(m: int) -> bool:
    """Hedgehog at d' = ``m`` recalls on one seed of three at 64 tokens."""
    accuracies = sorted(run["test"]["accuracy"] for run in pairs4("hedgehog", m)["runs"])
    return accuracies[-1] > 0.5 and accuracies[1] < 0.3


# The benchmarks.
ATTENTION = "benchmark_attention_cpu"


def attention_ratio(ratio: str, length: int, name: str = ATTENTION) -> float:
    """A ratio of the attention benchmark (``exact_over_bidir``, ...) at ``length``."""
    return next(r for r in data(name)["results"] if r["length"] == length)["ratios"][ratio]


def attention_case(case: str, length: int, name: str = ATTENTION) -> dict:
    """One case (``exact``, ``bidir``, ``causal``, ``gated``) of an attention benchmark's JSON at ``length``."""
    return next(r for r in data(name)["results"] if r["length"] == length)["cases"][case]


def shown(values, form: str) -> str:
    """The values in ``form``: one value where they all read the same, else their span."""
    texts = {form.format(v) for v in values}
    return texts.pop() if len(texts) == 1 else span(values, form)


def scaling(model: str, kind: str, length: int) -> dict:
    """One training step of the scaling benchmark."""
    return next(
        r
        for r in data("benchmark_scaling_cpu")["results"]
        if (r["model"], r["kind"], r["length"]) == (model, kind, length)
    )


def scaling_gain(length: int, model: str = "decoder") -> tuple[float, float]:
    """Exact attention's step time and peak memory over positive features' at ``length``."""
    exact, positive = scaling(model, "exact", length), scaling(model, "positive", length)
    return exact["median_ms"] / positive["median_ms"], exact["memory"]["peak_bytes"] / positive["memory"]["peak_bytes"]


def faster_from() -> int:
    """The first position from which rfa's decoding step is faster than Flax's at every longer position."""
    seconds = data("benchmark_flax_decoding_cpu")["seconds_per_token"]
    positions = sorted(int(p) for p in seconds["rfa"])
    slower = [p for p in positions if seconds["rfa"][str(p)] >= seconds["flax"][str(p)]]
    return next(p for p in positions if not slower or p > max(slower))


def decoding_is_flat(within: float = 1.2) -> bool:
    """Every stateful kind's decoding step, and rfa's Flax layer's, at the last position within ``within``x of the
    first."""
    flax = data("benchmark_flax_decoding_cpu")["ratios"]["last_vs_first"]
    return max(*data("benchmark_decoding_cpu")["ratios"]["last_vs_first"].values(), *flax.values()) <= within


DELTA_RULE = "benchmark_delta_rule_cpu"


def delta_ms(length: int, case: str, name: str = DELTA_RULE) -> float | None:
    row = next(r for r in data(name)["results"] if r["length"] == length)
    return row[case]["median_ms"] if row.get(case) else None


def delta_ratio(name: str, length: int) -> float:
    return data(DELTA_RULE)["ratios"][name][str(length)]


ESTIMATOR_COSTS = "benchmark_attention_estimators_cpu"


def estimator_cost(estimator: str, name: str = ESTIMATOR_COSTS) -> dict:
    return data(name)["estimators"]["estimators"][estimator]


def fit_share(estimator: str, name: str = ESTIMATOR_COSTS) -> float:
    """An estimator's fit time as a share of its forward and backward, in percent."""
    cost = estimator_cost(estimator, name)
    return 100 * cost["fit"]["median_ms"] / cost["median_ms"]
