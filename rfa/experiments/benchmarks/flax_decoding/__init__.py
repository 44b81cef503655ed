"""Time per decoded token through one Flax attention layer: rfa's recurrent caches vs Flax's softmax KV cache.

Run: ``rfa benchmark flax_decoding`` (``make benchmark``). One self-attention layer
(``--features`` wide, ``--heads`` heads, batch ``--batch``) decodes ``--steps`` tokens from each position in one
jitted ``lax.scan`` (Python dispatch not counted; median of ``--repeats`` calls, every (layer, position)
timed in turn, in a new random order each round, so that the machine's noise falls on all alike):

- ``flax``: ``nnx.MultiHeadAttention`` with ``decode=True``: its cache holds ``position + steps`` keys and values
  and each token attends to all of its slots, so a token costs O(position).
- ``rfa``: ``rfa.nnx.MultiHeadAttention`` (positive features, m = ``--num-features``) with ``decode=True``: its
  cache is the recurrent state, the same size at any position, so a token should cost the same at any position
  (target: 16k vs 128 <= 1.2x; the ratio is taken between the first position >= 128 and the last).
- ``deltanet``, ``gated_deltanet``, ``kda``, ``gla``: ``rfa.nnx.DeltaNet``, ``rfa.nnx.GatedDeltaNet``,
  ``rfa.nnx.KimiDeltaAttention`` and ``rfa.nnx.GatedLinearAttention`` with ``decode=True``: a state and (the delta
  rule) a convolution history, flat in position as well.

Each rfa layer is also compiled traced inside ``rfa.checks.enabled(False)`` at the reference position and timed in
turn with the rest: ``ratios/checks_over_unchecked`` is what the run-time checks cost a decoded token (target: within
10%). It reports the crossover, the first position from which rfa's ``MultiHeadAttention`` is faster than Flax's at
every longer position, and writes JSON and a log-log figure to the workdir.
"""
