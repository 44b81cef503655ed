"""Length generalization: does a model with relative positions handle strings longer than any it trained on?

  rfa study length_generalization --workdir workdir/length_generalization

Relative positional bias in kernelized attention (Luo et al., "Stable, Fast and Accurate: Kernelized Attention
with Relative Positional Encoding", NeurIPS 2021; ``rfa.kernelized_attention(..., relative_bias=b)``) makes a
query's weights depend on ``i − j`` only, so nothing in the attention names an absolute position the model never
saw. This study asks whether that carries a trained model beyond its training lengths. Every attention kind of
``config.attention`` trains ``tasks/<task>.py:<attention>[,<scale>]`` with every encoding of
``config.positional`` (``model.positional``: absolute sinusoids, rotary, or the bucketed relative bias), once per
seed of ``config.seeds``, on strings of 2-32 letters; each trained model is then rebuilt for
``config.longer_max_length`` tokens (``rfa.train.load_model(max_length=)``) and evaluated once on the test split
of ``config.longer_task`` (33-64 letters). The table gives test accuracy and teacher-forced sequence accuracy at
the training lengths and at the longer ones, mean ± standard deviation over the seeds, and compares the longer
accuracy with the first encoding's (paired over the seeds, Holm-corrected: :mod:`rfa.experiments.common.spread`). Two
rules that learn nothing give the floors the longer accuracies are read against: repeating the previous symbol (sorted
strings repeat letters often) and the majority symbol. The command writes the JSON and the table beside it
(``.md``).
"""

from __future__ import annotations

from rfa.experiments.common.report import write_report
from rfa.experiments.studies.length_generalization.measure import run
from rfa.experiments.studies.length_generalization.report import table


def main(config, workdir: str, output: str) -> None:
    """Trains every setting, prints the table and writes the JSON at ``output``, the table beside it."""
    results = run(config, workdir)
    text = table(results)
    print(text)
    write_report(output, results, text)
