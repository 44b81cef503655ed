"""A short prompt's prefill by the delta rule's chunked form against its recurrent form: where they cross.

Run: ``rfa benchmark prefill``. For each length L (a prompt), the forward pass of
:func:`rfa.attention.delta_rule_attention` at ``[1, L, 8, 64]`` with the state returned (what a prefill hands to
decoding), with one decay per token (Gated DeltaNet) and one per key channel (KDA):

- ``chunked``: chunks of 64 (one chunk of L below 64: a unit-triangular solve of L × L, then one step);
- ``recurrent``: ``chunk_size=1``, one token per scan step, the decoding form.

Timed as compiled programs (median of ``--repeats``, the cases in turns, in a new random order each round). The
crossover of a decay is the longest length up to which the recurrent form is at most as slow as the chunked one;
it is what ``rfa.layers.DeltaRuleOptions.recurrent_below`` should be on the machine measured. Its default is
fla's: fla's layers switch to their ``fused_recurrent`` kernels at 64 tokens and below, at inference, on a GPU.

Writes JSON (``--output``, default ``<workdir>/benchmark_prefill.json``; ``ratios``: the recurrent form's time over
the chunked one's, which the speed guard compares) and a markdown table beside it. CPU timings are ratios within
one run.
"""
