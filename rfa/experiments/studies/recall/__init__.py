"""Associative recall against recurrent state size: which attention kind recalls most per byte of decode state.

  rfa study recall --config recall:pairs4_l64 --workdir workdir/recall

Zoology (Arora et al., 2023) and Based (Arora et al., ICML 2024) tell linear-attention feature maps apart by
multi-query associative recall (MQAR, :mod:`rfa.data.mqar`) against the size of the recurrent state a decoder
carries. Every kind of ``config.attention`` trains ``tasks/<config.task>.py:<attention>[,<scale>]`` once per
seed of ``config.seeds``; kinds whose map takes a feature count (random features, Hedgehog, gated RFA) train at
each m of ``config.num_features`` (or of ``config.num_features_of[<attention>]``), the others (exact, elu, relu,
taylor) once; a kind in ``config.num_layers_of`` trains a decoder of that many layers (a stack pattern longer than
the task's, as Kimi Linear's 3 KDA layers to 1 exact), the others the task's. Each setting's state size is the
bytes of one layer's decode cache for one sequence at the config's length (exact attention: its keys and values,
which grow with the length; kernelized: the state ``Σ_j φ(k_j)[v_j, 1]ᵀ`` of every head, which does not), read
from the model's own ``init_cache``. Test accuracy at query positions is reported as mean ± standard deviation over
the seeds, compared with exact attention (paired over the seeds, Holm-corrected: :mod:`rfa.experiments.common.spread`).
The command writes the JSON, the table beside it (``.md``) and the figure (``.png``: accuracy against state bytes, log
x, one curve per kind).
"""

from __future__ import annotations

from rfa.experiments.common.report import write_report
from rfa.experiments.studies.recall.measure import run
from rfa.experiments.studies.recall.report import SMOKE_TEST, plot, table


def main(config, workdir: str, output: str) -> None:
    """Trains every setting, prints the table (a smoke test's says so and compares nothing) and writes the JSON
    at ``output``, the table and the figure beside it."""
    rows = run(config, workdir)
    text = (SMOKE_TEST + "\n\n" if config.smoke_test else "") + table(rows, verdicts=not config.smoke_test)
    print(text)
    write_report(output, rows, text, lambda path: plot(rows, path))
