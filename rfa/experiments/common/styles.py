"""One line style per attention kind or estimator, the same in every figure, and legends outside the data.

A figure that draws more series than a color cycle has colors (matplotlib's ten) would give two series one color.
Here the names of the committed figures (attention variants and estimators) keep a color and a marker of their own,
the same in every figure, so a regenerated figure looks as before; any other name (a kind or estimator added since,
or a user's) takes a style left over within its figure, distinct from the others there. Adding a kind needs no entry
here: the kinds and variants are the registry's (:mod:`rfa.layers.kinds`), this is only a palette.
"""

from __future__ import annotations

KNOWN_STYLES: dict[str, tuple[str, str]] = {  # name: (color, marker), the attention variants, then other estimators
    "exact": ("#1f77b4", "o"),
    "trig": ("#ff7f0e", "s"),
    "positive": ("#2ca02c", "^"),
    "positive_iid": ("#d62728", "D"),
    "hyperbolic": ("#9467bd", "v"),
    "oprf": ("#8c564b", "P"),
    "simplex_positive": ("#e377c2", "X"),
    "hybrid": ("#7f7f7f", "*"),
    "saderf": ("#bcbd22", "<"),
    "elu": ("#17becf", ">"),
    "relu": ("#a1caf1", "h"),
    "taylor": ("#222222", "d"),
    "rfa": ("#654522", "o"),
    "gated_rfa": ("#882d17", "s"),
    "hedgehog": ("#604e97", "^"),
    "linformer": ("#8db600", "D"),
    "fourier": ("#f3c300", "v"),
    "gla": ("#be0032", "P"),
    "deltanet": ("#2b3d26", "X"),
    "gated_deltanet": ("#f6a600", "*"),
    "gated_deltanet_positive": ("#e68fac", "<"),
    "sliding_window": ("#0067a5", ">"),
    "hybrid_gated_deltanet": ("#dcd300", "h"),
    "based": ("#f99379", "d"),
    "aderf": ("#000080", "o"),
    "sderf": ("#c2b280", "s"),
    "gerf": ("#848482", "^"),
    "gaussian_cosine": ("#e25822", "D"),
    "gaussian_trig": ("#008856", "v"),
    "kda": ("#875692", "P"),
    "hybrid_kda": ("#b3446c", "X"),
    "gated_deltanet_elu": ("#f38400", "h"),
    "mla": ("#008080", "d"),
}
"""The names with a fixed style, each its own color (tab10, then Kelly's colours of maximum contrast, then navy and
teal).
A style is written next to its name, so adding a name moves no other's; a name not listed takes a spare style."""
KNOWN = tuple(KNOWN_STYLES)
COLORS = tuple(dict.fromkeys(color for color, _ in KNOWN_STYLES.values()))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "d")
FITS = {"per_call": "--", "calibrated": "-."}  # a data-fitted estimator's fits: its color and marker, their lines
HOLLOW = ("per_call",)  # fits drawn with hollow markers too: a dash alone is hard to tell apart
UNKNOWN_LINE = ":"  # the line of names with no fixed style


def styles(names) -> dict[str, dict]:
    """``{name: {"color", "marker", "linestyle"}}`` (matplotlib's keywords) for the series of one figure, each
    distinct.

    A known name (:data:`KNOWN`) has its own color and marker, drawn solid, in every figure;
    ``"<estimator> (<fit>)"`` is the estimator's color and marker with the fit's line (:data:`FITS`), the marker
    hollow for a fit per call (:data:`HOLLOW`: ``"markerfacecolor": "none"``); other names (a user's own estimator)
    take dotted styles in colors that no known name of the figure has.

    Example:
      >>> s = styles(["exact", "positive", "oprf (calibrated)", "mine"])
      >>> s["exact"] == styles(["exact"])["exact"], len({tuple(v.values()) for v in s.values()})
      (True, 4)
      >>> s["oprf (calibrated)"]["linestyle"], s["mine"]["linestyle"]
      ('-.', ':')
    """
    names = list(dict.fromkeys(names))
    chosen: dict[str, tuple] = {}
    for name in names:
        base, _, fit = name.partition(" (")
        if name in KNOWN_STYLES:
            chosen[name] = (*KNOWN_STYLES[name], "-")
        elif base in KNOWN_STYLES and fit.rstrip(")") in FITS:
            chosen[name] = (*KNOWN_STYLES[base], FITS[fit.rstrip(")")])
    taken = {color for color, _, _ in chosen.values()}  # a spare style takes no color of the figure's known names
    spare = ((color, marker, UNKNOWN_LINE) for marker in MARKERS for color in COLORS if color not in taken)
    spare = (t for t in spare if t not in chosen.values())
    looks = {
        name: dict(zip(("color", "marker", "linestyle"), chosen.get(name) or next(spare), strict=True))
        for name in names
    }
    for name in names:
        if name.partition(" (")[2].rstrip(")") in HOLLOW and name in chosen:
            looks[name]["markerfacecolor"] = "none"
    return looks


def legend_outside(axis, **kwargs) -> None:
    """The axis' legend to the right of its data, never over it."""
    axis.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, **kwargs)
