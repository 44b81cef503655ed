"""The sentences of ``docs/results`` and the README that carry a number or a verdict, each recomputed from
``results/*.json``: one module per results page (a page with more claims than fit in one module is split by its
sections), assembled here for ``tests/test_results_pages.py``.

A :class:`Claim` is a sentence as its page writes it, with ``{}`` where a value comes from the data: the test
fills the slots from the JSON and looks for the sentence on the page, and checks what the sentence says in words
(``holds``). Change a number in a JSON and the claim that quotes it no longer appears on its page: the test names
the sentence. Pages are compared with whitespace collapsed and ``**`` emphasis removed.

Every results page and the README may carry no other result number and no other word of order or equality:
every number in their prose (outside the marked tables, code, links and figures: an integer, a decimal, a ratio
such as "8×" or "1/33", a percentage), and every word of :data:`ORDER` ("tied", "behind", "better", ...), must lie
in a claim, in :data:`SETUP` (a phrase that states the setup, not a result), or in one of the forms of
:data:`NOT_A_RESULT` (a setting such as ``m = 16``, a count of the protocol such as "300 steps", a citation's year,
a version). A claim with a word of order must say in its predicate why the word holds: for the seeded tables, the
Holm-corrected verdict.

Each page module names its page (``PAGE``, relative to ``docs/results``), its claims (``CLAIMS``) and the setup
phrases of its sections (``SETUP``); :mod:`.common` holds the :class:`Claim`, the helpers and vocabularies the pages
share, and the claims' only imports of rfa. No claim overlaps another on its page, so the order of :data:`CLAIMS`
is immaterial to the test.
"""

from . import (
    benchmarks_attention,
    benchmarks_delta_rule_decoding,
    benchmarks_gpu,
    benchmarks_pretrained,
    benchmarks_scaling,
    benchmarks_training_steps,
    estimators_in_models,
    estimators_in_models_qk,
    forecasting,
    lra,
    precision,
    readme,
    recall,
    recall_pairs4_l64,
    recall_pairs4_l128,
    reproductions,
    training_kinds,
    training_lengths_distill,
    vision,
)
from .common import NOT_A_RESULT, NOT_AN_ORDER, NUMBER, ORDER, PAGES, Claim

PAGE_MODULES = (
    precision,
    benchmarks_attention,
    benchmarks_scaling,
    benchmarks_delta_rule_decoding,
    benchmarks_pretrained,
    benchmarks_training_steps,
    benchmarks_gpu,
    estimators_in_models,
    estimators_in_models_qk,
    forecasting,
    lra,
    recall,
    recall_pairs4_l64,
    recall_pairs4_l128,
    reproductions,
    training_kinds,
    training_lengths_distill,
    vision,
    readme,
)
"""The page modules in the order of :data:`PAGES`, and each page's modules in the order of its sections."""

CLAIMS: list[Claim] = [claim for module in PAGE_MODULES for claim in module.CLAIMS]

SETUP: dict[str, tuple[str, ...]] = {
    page: tuple(phrase for module in PAGE_MODULES if page == module.PAGE for phrase in module.SETUP)
    for page in dict.fromkeys(module.PAGE for module in PAGE_MODULES)
}
"""Per page, phrases that state the setup (a config value, a data set's size, a described protocol), not a result."""

__all__ = ["CLAIMS", "NOT_AN_ORDER", "NOT_A_RESULT", "NUMBER", "ORDER", "PAGES", "SETUP", "Claim"]
