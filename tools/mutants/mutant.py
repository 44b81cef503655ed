"""The record of one mutant, and the repository its paths are relative to."""

from __future__ import annotations

import dataclasses
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One deliberate bug: in ``path``, ``original`` (occurring once) becomes ``mutated``; ``tests`` must fail."""

    id: str
    path: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    why: str
