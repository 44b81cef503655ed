"""Sort a string of random letters (seq2seq), with the attention kind chosen by the config string.

Run:
  python -m experiments.train --config configs/sort.py:positive --workdir workdir/train/sort/positive
Variants: ``:<attention>`` with <attention> in rfa.train.ATTENTION_VARIANTS (exact, trig, positive,
positive_iid, simplex_positive, hyperbolic, oprf, hybrid, saderf, elu, relu, taylor, rfa, gated_rfa, hedgehog,
linformer), and ``:<attention>,quick`` for a
seconds-long test run.
"""

from rfa.train import task_config


def seq2seq_config(task: str, arg: str | None):
    """The config of an algorithmic seq2seq task (copy, reverse, sort): same model and sizes for all three."""
    return task_config(
        task,
        arg,
        max_length=40,  # strings of 2-32 letters plus EOS
        batch_size=32,
        num_train_steps=600,
        eval_every=200,
        checkpoint_every=200,
    )


def get_config(arg: str | None = None):
    return seq2seq_config("sort", arg)
