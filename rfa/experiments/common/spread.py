"""Results over seeds, and the one verdict rule of every table that compares settings.

Every table that compares attention kinds trains each cell with several seeds (``config.seeds``) and reports the
mean ± the sample standard deviation over them (:class:`Spread`). A setting is compared with the table's reference
(exact attention, a teacher, a baseline) by :func:`compare`:

- **paired** where the reference ran every seed of the setting (every study's kinds share their seeds, so the seed's
  own effect — data order, initialization — cancels): the differences ``d_s = a_s − r_s`` have mean ``d̄`` and
  sample standard deviation ``s_d``; ``t = d̄ / (s_d / √n)`` with ``n − 1`` degrees of freedom, and the 95% interval
  is ``d̄ ± t_{0.975, n−1} s_d / √n`` (``t_{0.975, 2} = 4.30`` for 3 seeds, 2.78 for 5: not the normal 1.96);
- **Welch's** unpaired t where the seeds differ, with the Welch–Satterthwaite degrees of freedom;
- **one-sample** against a number (a deterministic baseline such as seasonal-naive forecasting).

One table is one family of tests: :func:`verdicts` applies Holm's step-down correction (Holm, "A simple
sequentially rejective multiple test procedure", Scand. J. Statist. 1979) across its comparisons, so that the
chance of any false "better" or "worse" in the table stays at 5%. A comparison whose correction does not reject
is "not separated (n seeds)": the data cannot tell the two apart, which is not a claim that they are equal — the
interval says how large a difference is still possible.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

LEVEL = 0.95  # of every interval
ALPHA = 0.05  # the family-wise error of one table's verdicts


@dataclasses.dataclass(frozen=True)
class Spread:
    """A metric over seeds: mean, sample standard deviation (0 for one seed) and the number of seeds.

    Example:
      >>> s = Spread.of([0.90, 0.92, 0.94])
      >>> round(s.mean, 3), round(s.std, 3), s.n
      (0.92, 0.02, 3)
      >>> s.cell("{:.3f}")
      '0.920 ± 0.020'
    """

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values) -> Spread:
        values = np.asarray(list(values), dtype=np.float64)
        if values.ndim != 1 or len(values) == 0:
            raise ValueError(f"a spread needs a non-empty list of numbers, got shape {values.shape}.")
        return cls(float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0, len(values))

    def cell(self, form: str) -> str:
        """``mean ± std`` in ``form`` (one seed: the mean alone)."""
        return form.format(self.mean) if self.n == 1 else f"{form.format(self.mean)} ± {form.format(self.std)}"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A setting against a reference over seeds: the mean difference (setting − reference), its 95% interval
    ``[low, high]``, the two-sided p-value of "no difference", the number of seeds ``n`` (of pairs where paired,
    else the fewer of the two sides) and the test used (``"paired"``, ``"welch"`` or ``"one-sample"``)."""

    difference: float
    low: float
    high: float
    p: float
    n: int
    test: str

    def cell(self, form: str) -> str:
        """``+d [low, high]`` in ``form`` (signed); one seed has no interval, and differences with no spread (the
        same on every seed, as at a ceiling) say so rather than print an interval of width 0, which reads as
        certainty. An interval narrower than ``form`` shows (``{:.Nf}``) takes more decimals, up to 6, until its
        ends differ.

        Example:
          >>> Comparison(0.02, -0.01, 0.05, 0.2, 3, "paired").cell("{:.3f}")
          '+0.020 [-0.010, +0.050]'
          >>> Comparison(0.0, 0.0, 0.0, 1.0, 3, "paired").cell("{:.3f}")
          '+0.000 (the same on all 3 seeds)'
          >>> Comparison(-8e-5, -4.4e-4, 2.8e-4, 0.4, 3, "paired").cell("{:.3f}")
          '-0.0001 [-0.0004, +0.0003]'
        """
        signed = "{:+" + form[2:]
        if math.isnan(self.p):
            return f"{signed.format(self.difference)} (1 seed: no interval)"
        if self.low == self.high:
            return f"{signed.format(self.difference)} (the same on all {self.n} seeds)"
        decimals = re.fullmatch(r"\{:\.(\d+)f\}", form)
        if decimals is not None:
            digits = int(decimals.group(1))
            while digits < 6 and round(self.low, digits) == round(self.high, digits):
                digits += 1
            signed = f"{{:+.{digits}f}}"
        return f"{signed.format(self.difference)} [{signed.format(self.low)}, {signed.format(self.high)}]"

    def as_dict(self) -> dict:
        """The fields as JSON takes them: NaN (no test) as None."""
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, fields: dict) -> Comparison:
        """The inverse of :meth:`as_dict`.

        Example:
          >>> c = compare({0: 0.9}, {0: 0.8})
          >>> c.as_dict()["p"] is None and Comparison.from_dict(c.as_dict()).cell("{:.1f}") == c.cell("{:.1f}")
          True
        """
        return cls(**{k: math.nan if v is None else v for k, v in fields.items()})


def compare(values: Mapping[int, float], reference: Mapping[int, float] | float) -> Comparison:
    """``values`` against ``reference``, both keyed by seed, or against a constant ``reference``.

    Paired t over the setting's seeds where the reference ran each of them (a reference with more seeds is paired
    on the shared ones), Welch's t otherwise, one-sample t against a number. With no spread at all (every
    difference the same) the interval is that difference and p is 0, or 1 where it is 0. Fewer than two seeds give
    no test: p and the interval are NaN.

    Args:
      values: ``{seed: metric}`` of the setting.
      reference: ``{seed: metric}`` of the reference, or a number.

    Returns:
      the :class:`Comparison`.

    Example:
      >>> c = compare({0: 0.91, 1: 0.93, 2: 0.92}, {0: 0.90, 1: 0.91, 2: 0.91})
      >>> c.test, round(c.difference, 3), round(c.low, 3), round(c.high, 3), round(c.p, 3)
      ('paired', 0.013, -0.001, 0.028, 0.057)
    """
    a = np.asarray(list(values.values()), dtype=np.float64)
    if isinstance(reference, Mapping):
        b = np.asarray(list(reference.values()), dtype=np.float64)
        if set(values) <= set(reference):
            differences = np.asarray([values[s] - reference[s] for s in values], dtype=np.float64)
            return _t(differences.mean(), _variance(differences) / len(a), len(a) - 1, len(a), "paired")
        va, vb = _variance(a) / len(a), _variance(b) / len(b)
        dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if min(len(a), len(b)) > 1 else 0
        return _t(a.mean() - b.mean(), va + vb, dof, min(len(a), len(b)), "welch")
    return _t(a.mean() - float(reference), _variance(a) / len(a), len(a) - 1, len(a), "one-sample")


def _variance(x: np.ndarray) -> float:
    return float(x.var(ddof=1)) if len(x) > 1 else math.nan


def _t(difference: float, variance: float, dof: float, n: int, test: str) -> Comparison:
    difference = float(difference)
    if n < 2 or math.isnan(variance) or (variance > 0 and not dof > 0):
        return Comparison(difference, math.nan, math.nan, math.nan, n, test)
    if variance == 0:
        return Comparison(difference, difference, difference, 1.0 if difference == 0 else 0.0, n, test)
    from scipy import stats  # here: importing scipy.stats takes 0.7 s, paid by every command that writes a report

    error = math.sqrt(variance)
    half = float(stats.t.ppf(0.5 + LEVEL / 2, dof)) * error
    p = float(2 * stats.t.sf(abs(difference) / error, dof))
    return Comparison(difference, difference - half, difference + half, p, n, test)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise error ``alpha``: sorted ascending, the
    i-th p-value (from 1) is rejected while ``p_(i) ≤ alpha / (m − i + 1)``, and none after the first that is not.
    NaN p-values (no test) are never rejected and do not count in m.

    Example:
      >>> holm([0.01, 0.04, 0.03, 0.005])
      [True, False, False, True]
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    rejected = [False] * len(p_values)
    for rank, (p, i) in enumerate(tested):
        if p > alpha / (len(tested) - rank):
            break
        rejected[i] = True
    return rejected


def verdicts(comparisons: Sequence[Comparison], *, higher_is_better: bool, alpha: float = ALPHA) -> list[str]:
    """The words of one table's comparisons, Holm-corrected across them: ``"better"`` or ``"worse"`` where the
    difference is rejected as zero, else ``"not separated (n seeds)"``.

    Example:
      >>> far = compare({0: 0.5, 1: 0.52, 2: 0.51}, {0: 0.9, 1: 0.91, 2: 0.92})
      >>> near = compare({0: 0.91, 1: 0.89, 2: 0.93}, {0: 0.9, 1: 0.91, 2: 0.92})
      >>> verdicts([far, near], higher_is_better=True)
      ['worse', 'not separated (3 seeds)']
    """
    words = []
    for comparison, rejected in zip(comparisons, holm([c.p for c in comparisons], alpha), strict=True):
        if rejected:
            words.append("better" if (comparison.difference > 0) == higher_is_better else "worse")
        else:
            words.append(f"not separated ({comparison.n} seed{'' if comparison.n == 1 else 's'})")
    return words


def table_verdicts(
    rows: Sequence, reference_of: Callable, values: Callable, *, higher_is_better: bool
) -> list[tuple[Comparison, str] | None]:
    """Every row of one table against its reference, with the table's Holm-corrected words.

    Args:
      rows: the table's rows, in any form.
      reference_of: a row's reference row, or None for a row compared with nothing (the reference itself).
      values: a row's ``{seed: metric}`` (:func:`per_seed`), or a number for a deterministic reference.
      higher_is_better: the direction of the metric.

    Returns:
      per row, None or ``(comparison, word)``.

    Example:
      >>> rows = [{"kind": "exact", "v": {0: 0.9, 1: 0.91, 2: 0.92}}, {"kind": "elu", "v": {0: 0.5, 1: 0.51, 2: 0.5}}]
      >>> out = table_verdicts(rows, lambda r: None if r is rows[0] else rows[0], lambda r: r["v"],
      ...                      higher_is_better=True)
      >>> out[0], out[1][1]
      (None, 'worse')
    """
    compared = [
        (i, compare(values(row), values(reference)))
        for i, row in enumerate(rows)
        if (reference := reference_of(row)) is not None
    ]
    out: list[tuple[Comparison, str] | None] = [None] * len(rows)
    words = verdicts([comparison for _, comparison in compared], higher_is_better=higher_is_better)
    for (i, comparison), word in zip(compared, words, strict=True):
        out[i] = (comparison, word)
    return out


IDENTITY = ("task", "kind", "attention", "attention_kind", "num_features", "architecture", "parameters", "steps")


def over_seeds(runs: list[dict]) -> dict:
    """One setting trained with several seeds: its identity, each split's metrics as :class:`Spread` dicts.

    Args:
      runs: the ``results.json`` of each seed (``rfa.train.train_and_evaluate``), same config but the seed.

    Returns:
      the identity fields of the runs (:data:`IDENTITY`), ``seeds``, ``validation`` and ``test``
      (``{metric: {"mean", "std", "n"}}``), the median ``step_time_s`` and ``tokens_per_s`` over the seeds,
      ``step_memory_bytes``, and ``runs``.
    """
    if not runs:
        raise ValueError("over_seeds needs at least one run.")
    row = {field: runs[0][field] for field in IDENTITY if field in runs[0]}
    row["seeds"] = [r["seed"] for r in runs]
    for split in ("validation", "test"):
        metrics = [name for name in runs[0][split] if name not in ("step", "split")]
        row[split] = {name: Spread.of(r[split][name] for r in runs).as_dict() for name in metrics}
    for field in ("step_time_s", "tokens_per_s"):
        values = [r[field] for r in runs if r[field] is not None]
        row[field] = float(np.median(values)) if values else None
    row["step_memory_bytes"] = runs[0]["step_memory_bytes"]
    row["runs"] = runs
    return row


def metric(row: dict, name: str, split: str = "test") -> Spread | None:
    """The :class:`Spread` of ``name`` in an :func:`over_seeds` row (None where the runs have no such metric)."""
    value = row[split].get(name)
    return None if value is None else Spread(**value)


def per_seed(row: dict, name: str, split: str = "test") -> dict[int, float]:
    """``{seed: value}`` of ``name`` in an :func:`over_seeds` row: what :func:`compare` pairs.

    Example:
      >>> per_seed({"runs": [{"seed": 0, "test": {"accuracy": 0.9}}, {"seed": 1, "test": {"accuracy": 0.8}}]},
      ...          "accuracy")
      {0: 0.9, 1: 0.8}
    """
    return {run["seed"]: run[split][name] for run in row["runs"]}
