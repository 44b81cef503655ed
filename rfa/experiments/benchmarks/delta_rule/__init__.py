"""The delta rule's chunked forms against its recurrent form, gated linear attention and exact attention, over L.

Run: ``rfa benchmark delta_rule``. For each length, the forward and backward pass (gradients
to q, k, v, and to β and the log-decays where a case has them) at ``[1, L, 8, 64]``, timed as compiled programs
(median of ``--repeats``, the cases in turns so that a drift of a shared machine falls on all), with XLA's
memory estimate:

- ``delta chunked``: ``rfa.attention.delta_rule_attention`` with a decay per token (Gated DeltaNet), chunks of 64:
  a 64 × 64 unit-triangular solve per chunk, then a scan over chunks;
- ``kda chunked``: the same with one decay per key channel (Kimi Delta Attention): the chunk's scores by
  sub-chunks of 8 (``rfa.attention.chunk_scores``);
- ``delta recurrent``: Gated DeltaNet with ``chunk_size=1``, one token per scan step (the decoding form), up to
  ``--recurrent_max``;
- ``gla chunked``: ``rfa.kernelized_attention`` causal with elu+1 features and one decay per feature (GLA's
  form, F = d = 64), chunks of 64 (sub-chunks of 8): the same head sizes;
- ``gated causal``: the same features with one decay per token (gated RFA's form), chunks of 64;
- ``exact``: ``jax.nn.dot_product_attention(..., is_causal=True)``, up to ``--exact_max``.

Writes JSON (``--output``, default ``<workdir>/benchmark_delta_rule.json``) with the log-log slopes of time against
L and, at each length, the ratios (``ratios``, which the speed guard compares): the chunked delta rule to GLA, GLA to
the same features with a decay per token (target <= 2), KDA to Gated DeltaNet (target <= 2); and a figure beside it.
CPU timings are ratios within one run; absolute ones count on a GPU.
"""
