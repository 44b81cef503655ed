"""Kernelized (random-feature) attention in O(L·m·d): bidirectional, cross, causal, recurrent, sequence-parallel.

``Att(Q, K, V) ≈ D̂⁻¹ φ(Q) (φ(K)ᵀ V)`` with ``D̂ = diag(φ(Q) (φ(K)ᵀ 1))`` — the L×L matrix is
never formed (Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.2;
Katharopoulos et al., "Transformers are RNNs", ICML 2020).

One call, one state, one module per mode. :func:`rfa.kernelized_attention` checks a call
(:mod:`~rfa.attention.kernelized.prepare`) and runs its mode, each a function ``mode(call) -> (output,
state)``: :mod:`~rfa.attention.kernelized.bidirectional` (also cross-attention),
:mod:`~rfa.attention.kernelized.causal` (chunked, with decay; a call on one token with a state is the O(1)
decoding step) and :mod:`~rfa.attention.kernelized.sequence_parallel`. Every mode starts from a
:class:`~rfa.attention.RecurrentState` (``initial_state``) and returns the state after its keys
(``return_state=True``): a prompt's state continues token by token and from there in another chunked pass,
without conversion. :func:`rfa.attention.naive_kernelized_attention` is the quadratic reference every mode is
tested against, written apart from all of this.

Stabilizer. Each feature map is ``φ = base ⊙ exp(log)`` with a per-row log-scale ``s = max log``
(see :mod:`rfa.random_features.feature_maps`). Queries use ``φ̃ = φ exp(-s)``: their per-row factor
cancels between numerator and normalizer. Keys enter as ``φ exp(-R)`` with a reference ``R`` at
least as large as every log-weight they are combined with: the global key maximum
(bidirectional), or per query the maximum of the decayed log-weights of the keys up to it and of
the state (causal), so a large later key never underflows the features of earlier ones. The
references are constants for autodiff (any reference gives the same output); the decay terms keep
their gradients. With ``renormalize=False`` the factors are multiplied back, giving
``φ(Q)(φ(K)ᵀV)`` itself, the estimate of ``exp(QKᵀ/√d) V`` for the softmax-kernel maps.
``LOWEST`` (not -inf) stands for "no key yet", so every exponent stays finite and <= 0.

Masking. Padded keys (and their values) are zeroed and their log-scales set to -inf, which removes
them from numerator and normalizer alike, so a padded batch equals the truncated sequences even if
the padding holds inf or NaN. Flax's dense masks are reduced to key padding, query padding and
whether they are causal (:mod:`rfa.attention.masks`); an arbitrary dense mask cannot be applied to
an implicit attention matrix and is refused. A key left out by the mask is skipped: it adds nothing
and its decay is not applied.
"""

from rfa.attention.kernelized.api import attention_over, kernelized_attention, sequence_parallel_attention
from rfa.attention.kernelized.prepare import Call, temperature

__all__ = ["Call", "attention_over", "kernelized_attention", "sequence_parallel_attention", "temperature"]
