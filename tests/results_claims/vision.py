"""``vision.md``: the digits, a ViT and a Swin model with every kind."""

import math

from .common import VISION, Claim, compare, data, per_seed, span, spread, table

PAGE = "vision.md"


def _vision(architecture: str) -> list[dict]:
    return [r for r in data(VISION) if r["architecture"] == architecture]


def _vision_bound(architecture: str) -> float:
    exact = _vision(architecture)[0]
    return max(
        max(abs(c.low), abs(c.high))
        for r in _vision(architecture)[1:]
        for c in [compare(per_seed(r, "accuracy"), per_seed(exact, "accuracy"))]
    )


CLAIMS = [
    Claim(
        PAGE,
        "No kind is separated from exact attention in either model: the ViT's six other kinds reach {} against "
        "exact's {}, Swin's three {} against {}.",
        lambda: (
            span(r["test"]["accuracy"]["mean"] for r in _vision("vit")[1:]),
            spread(_vision("vit")[0]["test"]["accuracy"]),
            span(r["test"]["accuracy"]["mean"] for r in _vision("swin")[1:]),
            spread(_vision("swin")[0]["test"]["accuracy"]),
        ),
        lambda: (
            {r["verdict"] for r in table(VISION)} == {"-", "not separated (3 seeds)"}
            and (len(_vision("vit")), len(_vision("swin"))) == (7, 4)
        ),
    ),
    Claim(
        PAGE,
        "in the ViT every difference lies within ±{} of accuracy at 95%, in Swin within ±{} (elu's seeds spread most).",
        lambda: (
            f"{math.ceil(_vision_bound('vit') * 100) / 100:.2f}",
            f"{math.ceil(_vision_bound('swin') * 100) / 100:.2f}",
        ),
        lambda: max(_vision("swin"), key=lambda r: r["test"]["accuracy"]["std"])["attention"] == "elu",
    ),
]

SETUP = (
    "instead of 1500",
    "the 269 test images",
    "(16 and a class token)",
)
