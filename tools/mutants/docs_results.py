"""Mutants of the committed results and their pages: results/*.json and docs/results/*.md.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant

MUTANTS = [
    # Evidence that holds up (issue 40).
    Mutant(
        "results-json-number-changed",
        "results/recall_cpu.json",
        '"accuracy": 0.09275',
        '"accuracy": 0.19275',
        ("tests/test_results_pages.py",),
        "one per-seed accuracy of a committed results file is changed",
    ),
    # Claims everywhere (issue 57).
    Mutant(
        "stale-table",
        "results/benchmark_decoding_cpu.json",
        '"128": 2.50465937412514e-05',
        '"128": 3.50465937412514e-05',
        ("tests/test_results_pages.py",),
        "one number of a committed benchmark JSON is changed: the page's decoding table no longer shows its data",
    ),
    Mutant(
        "stale-cost-column",
        "results/benchmark_train_step_cpu.json",
        '"hedgehog_m64": 0.1366635030026373',
        '"hedgehog_m64": 0.1966635030026373',
        ("tests/test_results_pages.py",),
        "one step time of the train_step benchmark is changed: the sort table's cost column no longer shows its data",
    ),
    Mutant(
        "tie-word-beside-not-separated",
        "docs/results/vision.md",
        "At this scale the digits do not tell the kinds apart",
        "At this scale the kinds train as well as exact attention",
        ("tests/test_results_pages.py::test_a_page_orders_results_only_in_claims_that_check_the_order",),
        "a page says the kinds train as well as exact attention where every verdict is not separated",
    ),
    Mutant(
        "benchmark-ratio-rounded",
        "docs/results/benchmarks.md",
        "It costs 32–63x the unbiased attention",
        "It costs 30–60x the unbiased attention",
        ("tests/test_results_pages.py::test_every_sentence_with_a_number_holds_against_its_json",),
        "the benchmarks page rounds a ratio its JSON gives (the relative bias's 32–63x written 30–60x)",
    ),
    Mutant(
        "claim-range-from-the-wrong-kinds",
        "docs/results/recall.md",
        "ReLU features fall to 0.482 at m = 4",
        "ReLU features fall to 0.48 at m = 4",
        ("tests/test_results_pages.py",),
        "a sentence of a results page no longer quotes its JSON",
    ),
]
