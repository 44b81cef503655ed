"""Estimators inside real models: how far is each random-feature estimator from softmax in a model as it is?

  rfa study estimators_in_models --workdir workdir/estimators_in_models

The package: :mod:`.measure` (the measurements), :mod:`.models` (the models; :mod:`.flax_encoder` the Flax-example
one), :mod:`.report` (table, summary, verdicts, figures) and :mod:`.qk_scale` (the same sites with their queries and
keys scaled). ``--output`` (default ``<workdir>/estimators_in_models.json``) gets the JSON, the table (``.md``) and
the figure (``.png``) beside it; the q/k-scale sweep writes ``<output stem>_qk_scale.json``, ``.md`` and ``.png``.

The estimator reproductions measure kernels on synthetic pairs; this study measures them where a user meets
them. Each model of ``config.models`` — rfa's text encoder (ListOps), decoder LM (Python source) and ViT
(digits), and a Flax-example encoder of ``nnx.MultiHeadAttention`` layers with one ``rfa.make_attention_fn``
per site (:class:`FlaxEncoder`) — is taken at initialization and after training with exact attention
(``config.states``). Each estimator of ``config.estimators`` at each m is then swapped in with the same weights
and measured against the exact model, once per seed (the model's initialization or training run, and the
random features):

- **layer error**: at each attention site, on the exact model's own ``q, k, v`` (``rfa.models.AttentionInputs``;
  the Flax layers' projections), ``|ô − o| / |o − ō|`` between the estimator's attention output and softmax's
  over the valid tokens (ō: their mean, so a shared offset is not signal). Each site is isolated;
- **output error**: the same measure on the swapped model's logits against the exact model's;
- **metric change**: the task metric (accuracy, or the LM's perplexity) of the swapped model minus the exact
  one's, on ``config.eval_batches`` test batches;
- **variance**: on each site's own queries and keys (scaled by ``d^{-1/4}``), the closed-form relative variance
  ``MSE / SM²`` of the m-feature estimate (``rfa.theory.log_mse``, iid features) against the measured one
  (``config.variance_draws`` draws), the median over ``config.variance_pairs`` query-key pairs of a sequence,
  averaged over the sites.

Data-fitted maps (oprf, the DERF family) are fitted per call (``per_call``: to each call's queries and keys;
bidirectional sites only) or ``calibrated`` on ``config.calibration_batches`` validation batches
(``rfa.layers.calibrating``; a causal site has only this). The test batches are read only to measure.
The table reports means ± standard deviations over the seeds, and the verdict names, per model and state,
the estimator with the lowest output error at the largest m and its difference from the next (paired over the
seeds, Holm-corrected: :mod:`rfa.experiments.common.spread`); :func:`summary` is the output error at the largest m as
one estimator-by-model table. The command writes the JSON, the table beside it (``.md``) and a figure
(``.png``: output error against m, a panel per model and state).
"""

from __future__ import annotations

import os

from rfa.experiments.common.report import write_report
from rfa.experiments.studies.estimators_in_models import qk_scale
from rfa.experiments.studies.estimators_in_models.measure import run
from rfa.experiments.studies.estimators_in_models.report import plot, table


def main(config, workdir: str, output: str) -> None:
    """Measures every model, state, seed and estimator, then the q/k-scale sweep; prints each table and writes the
    JSON at ``output`` (and ``<stem>_qk_scale.json``), the tables and figures beside them."""
    rows = run(config, workdir)
    text = table(rows)
    print(text)
    write_report(output, rows, text, lambda path: plot(rows, path))
    scale_rows = qk_scale.run(config, workdir)
    scale_text = qk_scale.table(scale_rows)
    print(scale_text)
    scale_output = os.path.splitext(output)[0] + "_qk_scale.json"
    write_report(scale_output, scale_rows, scale_text, lambda path: qk_scale.plot(scale_rows, path))
