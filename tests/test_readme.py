"""The README's Python code blocks run: every ```python block, in order, in one namespace (as a reader pastes them).

The README is the overview (the details are in docs/, built by tests/test_docs.py): its blocks are the tour,
a registered estimator swept against hyperbolic's closed form, and rfa's attention in Flax NNX and Linen.
"""

import math
import pathlib
import re

import numpy as np
import pytest
from helpers import own_estimators

pytestmark = pytest.mark.slow  # executes whole documents; the fast tier leaves them out

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
MAX_LINES = 350


@pytest.fixture(scope="module")
def namespace():
    with own_estimators():
        names = {}
        for i, block in enumerate(BLOCKS):
            exec(compile(block, f"README.md, python block {i + 1}", "exec"), names)
        yield names


def test_readme_has_the_blocks_this_file_checks():
    assert len(BLOCKS) >= 3, BLOCKS


def test_readme_stays_an_overview():
    """Tables, how-tos and the changelog live in docs/; the README stays short."""
    assert len(TEXT.splitlines()) <= MAX_LINES


def test_readme_links_to_files_that_exist():
    """Every relative link of the README (docs pages, results, references) names a file or folder of the repo."""
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", TEXT) if "://" not in t]
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert targets and not missing, missing


def test_tour_numbers_say_what_the_text_says(namespace):
    """Random N(0, 1) queries and keys: the mean of V beats positive features, as the README explains."""
    positive, mean_of_v = (
        namespace["relative_error"](namespace["out"]),
        namespace["relative_error"](namespace["mean_of_v"]),
    )
    assert positive > 1.0 > mean_of_v, (positive, mean_of_v)
    assert positive == pytest.approx(2.2, abs=0.1) and mean_of_v == pytest.approx(0.72, abs=0.01)


def test_flax_examples_ran_to_the_end(namespace):
    """The NNX layer decoded every token from its recurrent state (its assertion passed), and Linen attended."""
    state, heads = namespace["layer"].cached_state.get_value(), namespace["heads"]
    assert state.kv.shape == (namespace["batch"], heads, 128, namespace["features"] // heads + 1)
    assert namespace["y"].shape == namespace["x"].shape


def test_a_registered_estimator_runs_in_attention_and_in_the_sweep(namespace):
    """The user's antithetic map is hyperbolic written anew: same attention, Monte Carlo meets hyperbolic's theory."""
    np.testing.assert_allclose(namespace["mine"].shape, namespace["out"].shape)
    cells = {(r["estimator"], r["angle"]): r for r in namespace["sweep"].records}
    for angle in (60.0, 150.0):
        mine, reference = cells["antithetic", angle], cells["hyperbolic", angle]
        assert math.isnan(mine["mse_theory"])
        assert abs(mine["mse_monte_carlo"] - reference["mse_theory"]) < 4 * mine["standard_error"]
