"""The registry of reproductions: each name (``configs/<name>.py``) with its analysis and what its sweep needs.

``analyze(config, records, workdir)`` picks the analysis by ``config.name``; a config with a new
name gets the generic one of its experiment kind (theory vs Monte Carlo, or error vs m). The
analyses live in :mod:`experiments.reproductions` (the published 2021–22 comparisons) and
:mod:`experiments.frontier` (hybrid, simplex and dense-exponential features).
"""

from __future__ import annotations

from experiments import frontier, reproductions
from experiments.reproductions import Analysis, Verdict

ANALYSES = {**reproductions.ANALYSES, **frontier.ANALYSES}
REQUIREMENTS = {**reproductions.REQUIREMENTS, **frontier.REQUIREMENTS}  # config field -> values a sweep must hold
GENERIC = {  # the analysis of a sweep without a reproduction of its own, by experiment kind
    "kernel_mse": reproductions.kernel_agreement,
    "attention_error": reproductions.attention_error,
    "estimator_fit": frontier.derf_variance,
}


def analyze(config, records: list[dict], workdir: str) -> Analysis:
    """Writes the figures of ``config``'s reproduction into ``workdir``; returns its report sections and verdict.

    A sweep overridden so that it lacks what the published comparison needs (say, fig2 without
    trig) gets the generic analysis of its experiment kind, a note saying what is missing and a
    "not reproduced" verdict.

    Example (``records`` of a finished sweep, ``runner.run(config, workdir).records``):
      >>> analysis = analyze(config, records, workdir)  # doctest: +SKIP
      >>> analysis.verdict.line(config.name)  # doctest: +SKIP
      'performer_fig2 — reproduced: ratio MSE_trig / MSE_positive 0.432 at l = 1, 90° (published 0.43), ...'
    """
    generic = GENERIC[config.experiment]
    missing = {
        field: sorted(needed - set(config[field]))
        for field, needed in REQUIREMENTS.get(config.name, {}).items()
        if needed - set(config[field])
    }
    if missing:
        note = f"The published comparison of {config.name} needs {missing} in the sweep; showing the generic analysis."
        verdict = Verdict(False, f"the sweep lacks {missing}, which the published comparison needs")
        return Analysis(verdict, [note, *generic(config, records, workdir).sections])
    return ANALYSES.get(config.name, generic)(config, records, workdir)
