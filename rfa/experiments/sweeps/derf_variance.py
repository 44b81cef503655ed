"""Dense-exponential random features: the mean log second moment of positive, OPRF and the DERF family.

Likhosherstov et al., "Dense-Exponential Random Features", arXiv 2302.00787: nesting orders the objective
(positive >= oprf >= saderf >= aderf, oprf >= sderf) on any data; ADERF gains where queries and keys differ.
"""

from __future__ import annotations

from rfa.experiments.common.report import Verdict, fmt
from rfa.experiments.sweep_framework.registry import Reproduction, register_reproduction
from rfa.experiments.sweeps import estimator_fit
from rfa.experiments.sweeps.estimator_fit import derf_table

# Nesting (Likhosherstov et al., 2023): each pair (larger, smaller) holds for the objective on any data.
NESTING = (("positive", "oprf"), ("oprf", "saderf"), ("saderf", "aderf"), ("oprf", "sderf"))
# A typical objective on anisotropic q, k with different covariances, d = 16 (docs/references.md).
TYPICAL_DERF = {"positive": 3.9, "oprf": 2.9, "saderf": 2.7, "sderf": 2.5, "aderf": 2.1}


def derf_verdict(records: list[dict]) -> Verdict:
    """DERF: reproduced when the nesting order of the objective holds on every dataset, aderf is below oprf
    on anisotropic data, and Monte Carlo agrees with the closed-form variance at every compared pair.

    Example (``records`` of a finished run):
      >>> derf_verdict(records).claim  # doctest: +SKIP
      'mean log second moment, anisotropic: positive 3.12 > oprf 2.2 > saderf 1.9 > ... ; 16/16 pairs ...'
    """
    parts, holds = [], True
    for dataset, cells in derf_table(records).items():
        objective = {e: r["objective"] for e, r in cells.items()}
        nested = [objective[a] >= objective[b] - 1e-6 for a, b in NESTING if a in objective and b in objective]
        holds &= bool(nested) and all(nested)
        if dataset == "anisotropic" and {"oprf", "aderf"} <= set(objective):
            holds &= objective["aderf"] < objective["oprf"]
        ranked = sorted(objective, key=objective.get, reverse=True)
        parts.append(f"{dataset}: " + " > ".join(f"{e} {fmt(objective[e])}" for e in ranked))
    compared = sum(r["pairs_compared"] for r in records)
    agreeing = sum(r["pairs_agreeing"] for r in records)
    typical = " > ".join(f"{e} {v}" for e, v in TYPICAL_DERF.items())
    claim = (
        f"mean log second moment per vector, {'; '.join(parts)} (nesting: positive ≥ oprf ≥ saderf ≥ aderf, "
        f"oprf ≥ sderf; typical anisotropic d = 16: {typical}); variance within 4 SE of Monte Carlo at "
        f"{agreeing}/{compared} compared pairs"
    )
    return Verdict(holds and compared > 0 and agreeing == compared, claim)


def derf_variance(config, records: list[dict], workdir: str):
    """The estimator_fit analysis with the typical values beside it and the nesting verdict."""
    return estimator_fit.analyze(config, records, workdir, typical=TYPICAL_DERF, verdict=derf_verdict(records))


register_reproduction(Reproduction("derf_variance", "estimator_fit", derf_variance))
