"""A guard on speed: a benchmark's ratios against the figures of ``results/`` committed by the last release.

A ratio (a key holding ``_over_`` or ``ratio``: ``exact_over_bidir``, ``causal_over_bidir``,
``rfa_ratio_16384_vs_128``, ...) divides two timings of one run, so it carries from run to run on the same CPU
model where an absolute time does not. Each benchmark, once it has written its JSON, prints a warning for every
ratio that moved by more than :data:`TOLERANCE` from the committed JSON of the same name (``make benchmark``
runs them all): a slowdown is seen when it lands. The warning names both values; whether a move is a loss depends
on the ratio (``exact_over_bidir`` falling means rfa got slower, ``causal_over_bidir`` rising means the causal
form did), so the guard reports moves either way and the reader judges. Two quiet runs on one machine agree
within a few percent; the committed figures' machine is in their ``environment``. A benchmark whose ratios are
noisier (a decoded token of the tiny model takes 10–50 µs, and moves by a third between quiet runs) writes its own
``guard_tolerance`` into its JSON, the relative move the guard lets pass.
"""

from __future__ import annotations

import json
import os

from rfa.experiments.common.report import CHECKOUT_RESULTS, output_path, write_report

RESULTS = CHECKOUT_RESULTS
TOLERANCE = 0.10


def ratios(data, prefix: str = "") -> dict[str, float]:
    """``{path: value}`` of every number of ``data`` under a key that names a ratio, with paths such as
    ``results/4096/ratios/exact_over_bidir`` (a list of records is keyed by each record's ``length``, if any).

    Example:
      >>> ratios({"results": [{"length": 64, "ratios": {"exact_over_bidir": 2.5}}], "date": "x"})
      {'results/64/ratios/exact_over_bidir': 2.5}
    """
    found = {}
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = (
            (str(item.get("length", i)) if isinstance(item, dict) else str(i), item) for i, item in enumerate(data)
        )
    else:
        return found
    for key, value in items:
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if "_over_" in path.rsplit("/", 1)[-1] or "ratio" in path:
                found[path] = float(value)
        else:
            found.update(ratios(value, path))
    return found


def moves(new, committed, tolerance: float = TOLERANCE) -> list[str]:
    """One line per ratio of both ``new`` and ``committed`` that moved by more than ``tolerance`` (relative).

    Example:
      >>> moves({"speed_ratio": 1.5}, {"speed_ratio": 2.0})
      ['speed_ratio: 2 committed, 1.5 now (-25%)']
    """
    now, then = ratios(new), ratios(committed)
    lines = []
    for path in sorted(set(now) & set(then)):
        if then[path] and abs(now[path] / then[path] - 1) > tolerance:
            lines.append(f"{path}: {then[path]:.3g} committed, {now[path]:.3g} now ({now[path] / then[path] - 1:+.0%})")
    return lines


def warn_against_committed(output: str, data, backend: str = "cpu") -> list[str]:
    """Prints (and returns) a warning for each ratio of ``data``, just written to ``output``, that moved past
    :data:`TOLERANCE` from ``results/<name>.json`` (``<name>`` being the output's, with ``_<backend>`` added when
    the output's name has no backend)."""
    name = os.path.splitext(os.path.basename(output))[0]
    candidates = [name, f"{name}_{backend}"]
    committed = next(
        (os.path.join(RESULTS, f"{c}.json") for c in candidates if os.path.exists(os.path.join(RESULTS, f"{c}.json"))),
        None,
    )
    if committed is None or os.path.abspath(committed) == os.path.abspath(output):
        return []
    with open(committed) as f:
        then = json.load(f)
    tolerance = data.get("guard_tolerance", TOLERANCE) if isinstance(data, dict) else TOLERANCE
    lines = moves(data, then, tolerance)
    for line in lines:
        print(f"warning: {line} (against {os.path.relpath(committed)}, tolerance {tolerance:.0%})")
    then_cpu, now_cpu = (figures.get("environment", {}).get("cpu") for figures in (then, data))
    if lines and then_cpu != now_cpu:
        print(
            f"note: the committed figures were measured on {then_cpu or 'an unrecorded CPU'}, these on {now_cpu}: "
            "ratios carry between runs on one CPU model only; measure both versions here before reading a regression."
        )
    return lines


def publish(results: dict, text: str, output: str | None, workdir: str, name: str, plot=None) -> None:
    """A benchmark's last step: prints its table ``text``, writes ``results`` as JSON (``output``, else
    ``<workdir>/<name>``) with the table (and ``plot``'s figure) beside it, and warns where a ratio moved from the
    committed figures (:func:`warn_against_committed`)."""
    print(text)
    path = output_path(output, workdir, name)
    write_report(path, results, text, plot)
    warn_against_committed(path, results)
