"""Markdown tables and JSON summaries that the entry points print and write."""

from __future__ import annotations

import json
import os


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table, numbers right-aligned; cells are already formatted strings."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: str, data) -> None:
    """Writes ``data`` as indented JSON to ``path``, creating its directory (nothing if ``path`` is empty)."""
    if not path:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
