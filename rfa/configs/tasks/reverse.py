"""Reverse a string of random letters (seq2seq), with the attention kind chosen by the config string.

Run:
  rfa train --config reverse:positive --workdir workdir/train/reverse/positive
Variants: ``:<attention>`` with <attention> a variant of rfa.train.ATTENTION_VARIANTS (``rfa configs`` lists
them), ``:<attention>,short`` with 300 steps (the seeded tables of compare_kernels) and
``:<attention>,quick`` for a seconds-long test run.
"""

from rfa.configs.common import seq2seq_config


def get_config(arg: str | None = None):
    return seq2seq_config("reverse", arg)
