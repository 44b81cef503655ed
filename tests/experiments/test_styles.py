"""Figures a reader can read: in each panel no two series share a color and a marker, no tick labels collide, the
data has an x label and the legend stays off it, error bars say what they are; a kind looks the same in every figure.
The figures are drawn from the committed results, as ``rfa.experiments.tables`` draws them."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from rfa.experiments.common.styles import KNOWN, styles
from rfa.experiments.tables import FIGURES

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _series(axis) -> list[tuple[str, str, str, str]]:
    """(label, color, marker, its fill) of every data series of an axis: its lines and its error bars' lines. A hollow
    marker is another marker than the filled one of its shape."""
    lines = [line for line in axis.get_lines() if not line.get_label().startswith("_")]
    lines += [container.lines[0] for container in axis.containers if isinstance(container, ErrorbarContainer)]
    return [
        (
            line.get_label(),
            to_hex(line.get_color()),
            line.get_marker(),
            "hollow" if line.get_markerfacecolor() == "none" else "filled",
        )
        for line in lines
    ]


def _extent(label) -> tuple[np.ndarray, float, float]:
    """A drawn text's center, and its width and height along its own direction (as drawn unrotated)."""
    box = label.get_window_extent()
    rotation = label.get_rotation()
    label.set_rotation(0)
    upright = label.get_window_extent()
    label.set_rotation(rotation)
    return np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]), upright.width, upright.height


def _overlap(a, b) -> bool:
    """Whether two tick labels of one rotation overlap: their rectangles, both turned by that angle, overlap along
    the text's direction and across it."""
    (center_a, width_a, height_a), (center_b, width_b, height_b) = _extent(a), _extent(b)
    angle = np.deg2rad(a.get_rotation())
    along, across = np.array([np.cos(angle), np.sin(angle)]), np.array([-np.sin(angle), np.cos(angle)])
    apart = center_b - center_a
    return abs(apart @ along) < (width_a + width_b) / 2 and abs(apart @ across) < (height_a + height_b) / 2


def _collisions(axis) -> list[str]:
    """The pairs of drawn tick labels of an axis' x or y axis that overlap (after a draw)."""
    collisions = []
    for which in (axis.xaxis, axis.yaxis):
        low, high = sorted(which.get_view_interval())
        labels = [
            tick.label1
            for tick in which.get_major_ticks() + which.get_minor_ticks()
            if low <= tick.get_loc() <= high and tick.label1.get_visible() and tick.label1.get_text()
        ]
        collisions += [
            f"{a.get_text()!r} and {b.get_text()!r}"
            for i, a in enumerate(labels)
            for b in labels[i + 1 :]
            if _overlap(a, b)
        ]
    return collisions


BARS = re.compile(r"95% interval|± ?1 sd|standard (deviation|error)|range")  # what a figure's bars or bands are


@pytest.mark.slow  # about 5 s: every committed figure laid out and its text measured
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_committed_figure_can_be_read(name, monkeypatch):
    """Drawn from its JSON as ``rfa tables`` draws it (at a low resolution, not written): in each panel no two series
    share a color and a marker, no tick labels overlap, the data has an x label and the legend sits outside it; a
    figure with error bars or bands says what they are."""
    monkeypatch.setattr(Figure, "savefig", lambda *args, **kwargs: None)  # the artists are read, not the pixels
    figure = FIGURES[name](json.loads((RESULTS / f"{name}.json").read_text()), "unwritten.png")
    figure.set_dpi(40)
    figure.draw_without_rendering()
    words = " ".join(
        [figure.get_suptitle()]
        + [text for axis in figure.axes for text in (axis.get_title(), axis.get_xlabel(), axis.get_ylabel())]
    )
    for axis in (axis for axis in figure.axes if axis.get_visible()):
        panel = f"{name}, {axis.get_title()!r}"
        looks = [look[1:] for look in _series(axis)]
        assert len(looks) > 0 and len(set(looks)) == len(looks), f"{panel}: two series in one style: {_series(axis)}"
        assert not _collisions(axis), f"{panel}: tick labels overlap: {_collisions(axis)}"
        assert axis.get_xlabel(), f"{panel}: no x label"
        assert axis.get_legend() is None or axis.get_legend().get_bbox_to_anchor().x0 >= axis.bbox.x1 - 1, (
            f"{panel}: a legend over the data"
        )
        if axis.containers or any(isinstance(c, PolyCollection) for c in axis.collections):
            assert BARS.search(words), f"{panel}: error bars or bands, and no word of what they are"


def test_a_kind_has_one_style_in_every_figure_and_every_known_name_its_own():
    shipped, variants = (
        line.split()
        for line in subprocess.run(  # a fresh process: other tests register estimators of their own in this one
            [
                sys.executable,
                "-c",
                "import rfa, rfa.train; print(*rfa.random_features.registered_estimators()); "
                "print(*rfa.train.ATTENTION_VARIANTS)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    )
    assert "positive" in shipped and "gla" in variants
    every = styles([*KNOWN, *variants, *shipped])  # a name without a fixed style (a new kind) takes a spare one
    assert len({tuple(s.values()) for s in every.values()}) == len(every)
    fixed = styles(KNOWN)
    assert len({tuple(s.values()) for s in fixed.values()}) == len(KNOWN)
    assert len({s["color"] for s in fixed.values()}) == len(KNOWN)  # a color of its own, not only a marker
    assert styles(["gla", "exact"])["gla"] == fixed["gla"] == styles(["positive", "gla", "mine"])["gla"]
    mixed = styles(["oprf", "oprf (per_call)", "oprf (calibrated)", "mine", "yours"])
    assert len({tuple(s.values()) for s in mixed.values()}) == 5
    assert mixed["oprf (calibrated)"]["color"] == fixed["oprf"]["color"]
