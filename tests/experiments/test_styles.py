"""Figures a reader can read: no two series of one figure share a style, a kind looks the same in every figure, and
legends stay off the data. The figures are drawn from the committed results, as ``rfa.experiments.tables`` draws
them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.colors import to_hex

from rfa.experiments.styles import KNOWN, styles
from rfa.experiments.tables import FIGURES
from rfa.train import ATTENTION_VARIANTS

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _series(axis):
    """(label, color, marker, line style) of every data series of an axis: its lines and its error bars' lines."""
    lines = [line for line in axis.get_lines() if not line.get_label().startswith("_")]
    lines += [container.lines[0] for container in axis.containers if hasattr(container, "has_xerr")]
    return [(line.get_label(), to_hex(line.get_color()), line.get_marker(), line.get_linestyle()) for line in lines]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_two_series_of_a_committed_figure_share_a_style(name, tmp_path):
    figure = FIGURES[name](json.loads((RESULTS / f"{name}.json").read_text()), str(tmp_path / "figure.png"))
    for axis in figure.axes:
        looks = [look[1:] for look in _series(axis)]
        assert len(looks) > 0 and len(set(looks)) == len(looks), f"{name}, {axis.get_title()}: {_series(axis)}"
        assert axis.get_legend() is None or axis.get_legend().get_bbox_to_anchor().x0 >= axis.bbox.x1 - 1, (
            f"{name}: a legend over the data"
        )


def test_a_kind_has_one_style_in_every_figure_and_every_known_name_its_own():
    shipped = subprocess.run(  # a fresh process: other tests register estimators of their own in this one
        [sys.executable, "-c", "import rfa; print(*rfa.random_features.registered_estimators())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert set(ATTENTION_VARIANTS) <= set(KNOWN) and "positive" in shipped and set(shipped) <= set(KNOWN)
    fixed = styles(KNOWN)
    assert len({tuple(s.values()) for s in fixed.values()}) == len(KNOWN)
    assert len({s["color"] for s in fixed.values()}) == len(KNOWN)  # a color of its own, not only a marker
    assert styles(["gla", "exact"])["gla"] == fixed["gla"] == styles(["positive", "gla", "mine"])["gla"]
    mixed = styles(["oprf", "oprf (per_call)", "oprf (calibrated)", "mine", "yours"])
    assert len({tuple(s.values()) for s in mixed.values()}) == 5
    assert mixed["oprf (calibrated)"]["color"] == fixed["oprf"]["color"]
