"""``reproductions.md``: the page quotes no result (its full run's numbers are not committed as JSON), so it has no
claim; only its setup phrases."""

from .common import Claim

PAGE = "reproductions.md"


CLAIMS: list[Claim] = []

SETUP = (
    "(predicted relative error > 0.15)",
    "a kill -9",
    "15 pairs × 4 m",
    "all 8 softmax estimators",
)
