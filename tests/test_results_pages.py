"""The results pages against their data.

Every comparison table on ``docs/results`` is rendered from its ``results/*.json`` by the study's own code
(``rfa.experiments.tables``), and every verdict in it is recomputed here from the per-seed values with the documented
rule, by an independent implementation: scipy's paired, Welch and one-sample t-tests and statsmodels' Holm
correction, across each table's comparisons. The sentences with numbers are held by ``tests/results_claims/``, one
module per results page.
"""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import holm_reference
from results_claims import CLAIMS, NOT_A_RESULT, NOT_AN_ORDER, NUMBER, ORDER, PAGES, SETUP, Claim
from scipy import stats

from rfa.experiments import tables

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
RESULTS_PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))


def load(name):
    return json.loads((RESULTS / f"{name}.json").read_text())


@pytest.mark.parametrize("page", RESULTS_PAGES, ids=lambda p: p.name)
def test_every_marked_table_of_a_page_is_rendered_from_its_json(page):
    for key, body in tables.page_sections(page.read_text()):
        assert body == tables.render(key), (
            f"{page.name}: the table {key!r} is not what its JSON gives; run `rfa tables`."
        )


def test_an_empty_marked_section_is_found_and_filled_without_reaching_into_the_next():
    page = "<!-- table: recall_cpu -->\n<!-- /table -->\ntext\n<!-- table: recall_cpu -->\n| old |\n<!-- /table -->\n"
    assert tables.page_sections(page) == [("recall_cpu", ""), ("recall_cpu", "| old |")]
    filled = tables.synced(page)
    assert tables.page_sections(filled) == [("recall_cpu", tables.render("recall_cpu"))] * 2 and "\ntext\n" in filled


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_every_committed_table_is_its_json_under_the_current_rule(name):
    assert (RESULTS / f"{name}.md").read_text() == tables.render(name) + "\n", (
        f"results/{name}.md is stale; run `rfa tables`."
    )


def test_every_table_with_a_verdict_on_the_pages_is_rendered_from_json():
    loose = []
    for page in RESULTS_PAGES:
        text = tables.SECTION.sub("", page.read_text())
        loose += [f"{page.name}: {line}" for line in text.splitlines() if line.startswith("|") and "verdict" in line]
    assert not loose, f"write these tables with rfa.experiments.tables (marked sections): {loose}"


def _p(values, reference):
    """The two-sided p-value of the documented rule, by scipy: paired over the setting's seeds where the reference
    has them all, else Welch, or one-sample against a number; NaN with one seed, and 0 or 1 where the differences
    have no spread."""
    if isinstance(reference, dict):
        if set(values) <= set(reference):
            a = np.array([values[s] for s in sorted(values)])
            b = np.array([reference[s] for s in sorted(values)])
            differences = a - b
            if len(a) < 2:
                return math.nan
            if np.ptp(differences) == 0:
                return 1.0 if differences[0] == 0 else 0.0
            return stats.ttest_rel(a, b).pvalue
        return stats.ttest_ind(list(values.values()), list(reference.values()), equal_var=False).pvalue
    a = np.array(list(values.values()))
    if len(a) < 2:
        return math.nan
    if np.ptp(a) == 0:
        return 1.0 if a[0] == reference else 0.0
    return stats.ttest_1samp(a, reference).pvalue


def _words(comparisons, *, higher_is_better):
    """Holm across the table (statsmodels), then the words: better / worse / not separated (n seeds)."""
    p = np.array([_p(values, reference) for values, reference in comparisons])
    tested = ~np.isnan(p)
    rejected = np.zeros(len(p), dtype=bool)
    if tested.any():
        rejected[tested] = holm_reference(p[tested])
    words = []
    for (values, reference), reject in zip(comparisons, rejected, strict=True):
        mean = np.mean(list(reference.values())) if isinstance(reference, dict) else reference
        if reject:
            words.append("better" if (np.mean(list(values.values())) > mean) == higher_is_better else "worse")
        else:
            words.append(f"not separated ({len(values)} seed{'' if len(values) == 1 else 's'})")
    return words


def _seeds(row, name="accuracy"):
    return {run["seed"]: run["test"][name] for run in row["runs"]}


def _first_of(rows, key):
    first = {}
    for row in rows:
        first.setdefault(key(row), row)
    return [(_seeds(row), _seeds(first[key(row)])) for row in rows if first[key(row)] is not row]


def _training(rows):
    task = lambda row: (row["task"], row.get("architecture"))  # noqa: E731
    return _first_of(rows, task), True


def _recall(rows):
    exact = next(row for row in rows if row["attention"] == "exact")
    return [(_seeds(row), _seeds(exact)) for row in rows if row is not exact], True


def _forecast(results):
    naive = results["seasonal_naive"]["mse"]
    return [(_seeds(row, "mse"), naive) for row in results["runs"]], False


def _lengths(results):
    longer = lambda row: {run["seed"]: run["accuracy"] for run in row["longer_runs"]}  # noqa: E731
    first = {}
    for row in results["rows"]:
        first.setdefault(row["attention"], row)
    return [
        (longer(row), longer(first[row["attention"]])) for row in results["rows"] if first[row["attention"]] is not row
    ], True


def _distill(summary):
    scores = {}
    for seed in summary["per_seed"]:
        for name, run in seed["runs"].items():
            scores.setdefault(name, {})[seed["seed"]] = run["score"]
    teacher = scores.pop("teacher (exact)")
    return [(values, teacher) for values in scores.values()], True


def _estimators(rows):
    comparisons = []
    for panel in dict.fromkeys((r["model"], r["state"]) for r in rows):
        own = [r for r in rows if (r["model"], r["state"]) == panel]
        largest = max(r["num_features"] for r in own)
        ranked = sorted((r for r in own if r["num_features"] == largest), key=lambda r: r["output_error"]["mean"])
        nxt = next(r for r in ranked if r["estimator"] != ranked[0]["estimator"])
        comparisons.append(tuple({r["seed"]: r["output_error"] for r in row["records"]} for row in (ranked[0], nxt)))
    return comparisons, False


RULES = {
    "train_cpu_sort_seeded": _training,
    "train_cpu_listops_cpu_seeded": _training,
    "train_cpu_python_source_seeded": _training,
    "train_cpu_vision_seeded": _training,
    "recall_cpu": _recall,
    "recall_pairs8_exact_cpu": _recall,
    "recall_pairs4_l64_cpu": _recall,
    "recall_pairs4_l128_cpu": _recall,
    "forecast_co2_cpu": _forecast,
    "forecast_sunspots_cpu": _forecast,
    "length_generalization_cpu": _lengths,
    "distill_cpu": _distill,
    "estimators_in_models_cpu": _estimators,
}


def _table_words(text):
    """The verdict column of a markdown table (rows with one), or the closing words of verdict lines."""
    lines = text.splitlines()
    if "verdict" in lines[0]:
        column = [c.strip() for c in lines[0].strip("|").split("|")].index("verdict")
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line.startswith("|")]
        return [cell[column] for cell in cells if cell[column] != "-"]
    closing = [
        re.search(r": (separated|not separated \(\d+ seeds?\))", line)[1] for line in lines if line.startswith("- ")
    ]
    return ["better" if word == "separated" else word for word in closing]  # the lowest error against the next


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_verdict_of_a_seeded_table_follows_from_its_per_seed_values(name):
    comparisons, higher_is_better = RULES[name](load(name))
    key = "estimators_in_models_cpu:verdicts" if name == "estimators_in_models_cpu" else name
    assert _table_words(tables.render(key)) == _words(comparisons, higher_is_better=higher_is_better)


def test_the_independent_rule_reads_a_made_up_table_as_expected():
    exact = {0: 0.90, 1: 0.91, 2: 0.92}
    far = {0: 0.50, 1: 0.52, 2: 0.51}
    near = {0: 0.91, 1: 0.89, 2: 0.93}
    assert _words([(far, exact), (near, exact)], higher_is_better=True) == ["worse", "not separated (3 seeds)"]
    assert _words([(exact, 0.5), ({0: 0.5}, 0.4)], higher_is_better=False) == ["worse", "not separated (1 seed)"]


def _normalized(text):
    return re.sub(r"\s+", " ", text.replace("**", ""))


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.page}: {c.text[:60]}")
def test_every_sentence_with_a_number_holds_against_its_json(claim):
    page = _normalized((ROOT / "docs" / "results" / claim.page).read_text())
    sentence = claim.sentence()
    assert sentence in page, f"{claim.page}: this sentence no longer holds against its JSON; the data give\n{sentence}"
    assert claim.holds(), f"{claim.page}: what this sentence says in words no longer holds:\n{sentence}"


def _unheld(page):
    """The prose of ``page`` that no claim, no :data:`SETUP` phrase and no marked table holds, without code, links
    and figures."""
    text = tables.SECTION.sub("", (ROOT / "docs" / "results" / page).read_text())
    text = _normalized(re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    for sentence in [c.sentence() for c in CLAIMS if c.page == page] + list(SETUP.get(page, ())):
        text = text.replace(_normalized(sentence), "")
    return re.sub(r"`[^`]*`|!\[[^\]]*\]\([^)]*\)|\]\([^)]*\)|<[^>]*>", "", text)


@pytest.mark.parametrize("page", PAGES)
def test_a_page_has_no_result_number_outside_its_claims(page):
    text = NOT_A_RESULT.sub("", _unheld(page))
    loose = [text[max(0, m.start() - 40) : m.end() + 20] for m in NUMBER.finditer(text)]
    assert not loose, f"{page}: numbers held by no claim (tests/results_claims/): {loose}"


@pytest.mark.parametrize("page", PAGES)
def test_a_page_orders_results_only_in_claims_that_check_the_order(page):
    text = NOT_AN_ORDER.sub("", _unheld(page))
    loose = [text[max(0, m.start() - 60) : m.end() + 20] for m in ORDER.finditer(text)]
    assert not loose, f"{page}: words of order or equality held by no claim (tests/results_claims/): {loose}"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if ORDER.search(c.text)], ids=lambda c: f"{c.page}: {c.text[:60]}")
def test_a_claim_that_orders_results_checks_the_order(claim):
    assert claim.holds is not Claim.holds, f"{claim.page}: this claim orders results but checks nothing:\n{claim.text}"


def test_the_checker_catches_every_form_of_a_number_and_leaves_the_setup():
    prose = "8× faster, 30–60x, 1/33 of the memory, 0.7% of the error, 12 of 16 and 0.482"
    assert NUMBER.findall(prose) == ["8", "30", "60", "1", "33", "0.7", "12", "16", "0.482"]
    setup = "m = 16 for 300 steps of a 2-layer model of width 64 at 3e-3 (release 0.2.0; Luo et al. 2021)"
    assert NUMBER.findall(NOT_A_RESULT.sub("", setup)) == []
    assert ORDER.findall("tied with it, the others behind; it trains as well") == ["tied", "behind", "as well"]
    layout = "the table below, with the same seeds, a byte-level model (1700–1915); but below exact attention"
    assert ORDER.findall(NOT_AN_ORDER.sub("", layout)) == ["below"]
    assert NUMBER.findall(NOT_A_RESULT.sub("", layout)) == []
