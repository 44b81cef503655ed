"""The forecasting comparison: each attention kind against seasonal-naive, and step time against the lookback.

  rfa study forecasting --workdir workdir/forecasting

1. Every attention kind of the config trains ``tasks/<task>.py:<attention>`` once per seed of ``config.seeds`` in
   ``<workdir>/<attention>/seed_<seed>`` (a finished run is read back; with ``config.candidates``, at every
   candidate scale, of which the one with the lowest validation MSE is kept: :func:`select`) and is scored once, at
   the end, on the task's test years by MSE and MAE of the series normalised by the training years' statistics (mean
   ± standard deviation over the seeds); the seasonal-naive forecast (the last observed season repeated,
   :func:`rfa.data.series.seasonal_naive`) is scored on the same windows, and the table gives each kind's MSE
   difference from it with its 95% interval and the Holm-corrected verdict (:mod:`rfa.experiments.common.spread`).
2. One training step of the forecaster (patches of one step: a token per step) is compiled and timed at
   each lookback for the config's timing kinds; the log-log slopes say how the step grows with the lookback.

The command writes the results (JSON), the table beside them (``.md``) and the step-time figure (``.png``;
none when ``config.lookbacks`` is empty).
"""

from __future__ import annotations

from rfa.experiments.common.report import write_report
from rfa.experiments.common.timing import environment
from rfa.experiments.studies.forecasting.measure import run
from rfa.experiments.studies.forecasting.report import plot, table


def main(config, workdir: str, output: str) -> None:
    """Trains and times every kind, prints the table and the slopes, and writes the JSON at ``output``, the table
    and the step-time figure beside it."""
    results = run(config, workdir)
    results["environment"] = environment()
    text = table(results)
    print(text)
    for kind, value in results["slopes"].items():
        print(f"step time against lookback, {kind}: slope {value}")
    write_report(output, results, text, (lambda path: plot(results, path)) if results["timing"] else None)
