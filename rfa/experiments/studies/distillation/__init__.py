"""Hedgehog attention distillation: turn a trained exact-attention model into a linear-attention one.

  rfa study distillation --workdir workdir/distillation
  rfa study distillation --config distillation:quick --workdir /tmp/distillation

Zhang et al., "The Hedgehog & the Porcupine: Expressive Linear Attentions with Softmax Mimicry",
ICLR 2024, Sec. 4. Per seed of ``config.seeds``, three runs in ``<workdir>/seed_<seed>/``, each resumable:

- ``teacher/``: ``tasks/<task>.py:exact`` trained by the training runner (read back when finished).
- ``student/``: the teacher's weights with a Hedgehog map ``φ(x) = [softmax(Wx + b), softmax(-(Wx + b))]``
  at every attention site. Stage 1 trains only the maps (W, b per head), each site on the teacher's
  own queries and keys at that site, to minimise the cross-entropy between the teacher's softmax
  attention weights and the site's linear attention weights ``φ(q_i)ᵀφ(k_j) / Σ_l φ(q_i)ᵀφ(k_l)``
  (same masks: key padding, causal at decoder self-attention). Every site sees the teacher's
  inputs, not the student's, so the sites are distilled layer by layer independently (here in
  one loop: their losses share no parameter). Stage 2 fine-tunes the whole student on the task
  (the training runner, starting from the distilled weights).
- ``scratch/``: ``tasks/<task>.py:hedgehog`` trained from scratch for the teacher's steps.

``--output`` (default ``<workdir>/distillation.json``) and the ``.md`` beside it hold the evaluation of the
teacher, the student after stage 1 and after stage 2, and the scratch run, with the accuracy each
recovers of the teacher's: mean ± standard deviation over the seeds, whether each differs from the
teacher by more than that spread, and every seed's own rows.
"""

from __future__ import annotations

from rfa.experiments.common.report import write_report
from rfa.experiments.common.spread import Spread
from rfa.experiments.studies.distillation.measure import run
from rfa.experiments.studies.distillation.report import table


def main(config, workdir: str, output: str) -> None:
    """Trains every seed's teacher, student and scratch runs, prints the table and stage 1's loss, and writes the
    JSON at ``output``, the table beside it."""
    summary = run(config, workdir)
    text = table(summary)
    first, last = (Spread(**summary["stage1_loss"][end]).cell("{:.3f}") for end in ("first", "last"))
    print(f"{text}\n\nstage 1 attention cross-entropy: {first} -> {last}")
    write_report(output, summary, text)
