"""Results over seeds: mean and spread of a metric, and whether two settings differ by more than that spread.

Every table that compares attention kinds trains each cell with several seeds (``config.seeds``) and reports the
mean ± the sample standard deviation over them. Two cells are called *separated* when their means differ by more
than twice the standard error of the difference, ``|a̅ − b̅| > 2 √(s_a²/n_a + s_b²/n_b)`` (Welch's statistic
above 2, about a 95% two-sided level for normal errors); otherwise the difference is within seed noise and a
table says "tie". With 3 seeds this is a rough screen, not a test with a calibrated error rate.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


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


def separated(a: Spread, b: Spread | float) -> bool:
    """Whether ``a`` and ``b`` differ by more than twice the standard error of their difference.

    ``b`` may be a number: a deterministic baseline (seasonal-naive), which adds no spread of its own. With one
    seed on a side there is no spread to compare with: never separated.

    Example:
      >>> separated(Spread(0.90, 0.01, 3), Spread(0.80, 0.01, 3))
      True
      >>> separated(Spread(0.90, 0.05, 3), Spread(0.85, 0.05, 3))
      False
      >>> separated(Spread(1.06, 0.04, 3), 1.08)
      False
    """
    b = b if isinstance(b, Spread) else Spread(float(b), 0.0, math.inf)  # a constant: no spread, however many seeds
    if a.n < 2 or b.n < 2:
        return False
    return abs(a.mean - b.mean) > 2 * math.sqrt(a.std**2 / a.n + b.std**2 / b.n)


def versus(a: Spread, reference: Spread | float, *, higher_is_better: bool) -> str:
    """``"better"``, ``"worse"`` or ``"tie"`` of ``a`` against ``reference`` (:func:`separated` decides a tie).

    Example:
      >>> versus(Spread(0.90, 0.01, 3), Spread(0.80, 0.01, 3), higher_is_better=True)
      'better'
    """
    if not separated(a, reference):
        return "tie"
    mean = reference.mean if isinstance(reference, Spread) else reference
    return "better" if (a.mean > mean) == higher_is_better else "worse"


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
