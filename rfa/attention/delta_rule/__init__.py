"""The delta rule as kernelized attention: DeltaNet and Gated DeltaNet, chunked, recurrent and their reference.

Additive linear attention writes ``S_t = S_{t−1} + φ(k_t) v_tᵀ``: a key written twice holds the sum of its values.
The delta rule writes the error instead, ``S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀ k_t)ᵀ``, so that with
``β_t = 1`` and a unit key the state then reads ``v_t`` for ``k_t``: it overwrites (Schlag, Irie, Schmidhuber,
"Linear Transformers Are Secretly Fast Weight Programmers", ICML 2021). The gated rule decays the state first,
``S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ`` (Yang, Kautz, Hatamizadeh, "Gated Delta Networks:
Improving Mamba2 with Delta Rule", ICLR 2025). :func:`delta_rule_attention` checks a call and runs one of two
forms on rows ``[batch·heads, L, ·]``: :mod:`~rfa.attention.delta_rule.chunked` (the WY/UT form of Yang, Wang,
Zhang, Shen, Kim, NeurIPS 2024, for training and prompts) and :mod:`~rfa.attention.delta_rule.recurrent` (token
by token, for decoding). :func:`naive_delta_rule_attention` is the recurrence as written, the reference both are
tested against (outputs, states and gradients, in float64). :func:`normalized_features` makes any registered
estimator the map of q and k (the kernelized delta rule).
"""

from rfa.attention.delta_rule.api import delta_rule_attention
from rfa.attention.delta_rule.features import normalized_features
from rfa.attention.delta_rule.naive import naive_delta_rule_attention

__all__ = ["delta_rule_attention", "naive_delta_rule_attention", "normalized_features"]
