"""One line style per attention kind or estimator, the same in every figure, and legends outside the data.

A figure that draws more series than a color cycle has colors (matplotlib's ten) would give two series one color.
Here every name the project knows — the training configs' attention variants (``rfa.train.ATTENTION_VARIANTS``)
and the registered estimators — has a color and a marker of its own, the same in every figure; names it does not
know (a user's own estimator) take styles left over within their figure.
"""

from __future__ import annotations

from rfa.train.config import ATTENTION_VARIANTS

COLORS = (  # tab10, then Kelly's colours of maximum contrast: one colour per known name
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#a1caf1",
    "#222222",
    "#654522",
    "#882d17",
    "#604e97",
    "#8db600",
    "#f3c300",
    "#be0032",
    "#2b3d26",
    "#f6a600",
    "#e68fac",
    "#0067a5",
    "#dcd300",
    "#f99379",
    "#875692",
    "#c2b280",
    "#848482",
    "#e25822",
    "#008856",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "d")
FITS = {"per_call": "--", "calibrated": "-."}  # a data-fitted estimator's fits: its color and marker, their lines
UNKNOWN_LINE = ":"  # the line of names with no fixed style


KNOWN = (*ATTENTION_VARIANTS, "aderf", "sderf", "gerf", "gaussian_cosine", "gaussian_trig")
"""The names with a fixed style: the attention variants, then rfa's other estimators (a test holds it to both)."""


def styles(names) -> dict[str, dict]:
    """``{name: {"color", "marker", "linestyle"}}`` for the series of one figure, each distinct.

    A known name (:data:`KNOWN`) has its own color and marker, drawn solid, in every figure;
    ``"<estimator> (<fit>)"`` is the estimator's color and marker with the fit's line (:data:`FITS`); other names
    (a user's own estimator) take dotted styles that no other series of the figure uses.

    Example:
      >>> s = styles(["exact", "positive", "oprf (calibrated)", "mine"])
      >>> s["exact"] == styles(["exact"])["exact"], len({tuple(v.values()) for v in s.values()})
      (True, 4)
      >>> s["oprf (calibrated)"]["linestyle"], s["mine"]["linestyle"]
      ('-.', ':')
    """
    names = list(dict.fromkeys(names))
    known = {name: (COLORS[i], MARKERS[i % len(MARKERS)]) for i, name in enumerate(KNOWN)}
    chosen: dict[str, tuple] = {}
    for name in names:
        base, _, fit = name.partition(" (")
        if name in known:
            chosen[name] = (*known[name], "-")
        elif base in known and fit.rstrip(")") in FITS:
            chosen[name] = (*known[base], FITS[fit.rstrip(")")])
    spare = ((color, marker, UNKNOWN_LINE) for marker in MARKERS for color in COLORS)
    spare = (t for t in spare if t not in chosen.values())
    return {
        name: dict(zip(("color", "marker", "linestyle"), chosen.get(name) or next(spare), strict=True))
        for name in names
    }


def legend_outside(axis, **kwargs) -> None:
    """The axis' legend to the right of its data, never over it."""
    axis.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, **kwargs)
