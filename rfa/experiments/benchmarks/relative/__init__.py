"""The cost of a relative positional bias in kernelized attention: the FFT form against the dense one, over L.

Run: ``rfa benchmark relative``. For each length, the forward and backward pass (gradients
to q, k, v and the bias ``b [heads, 2L − 1]``) of causal kernelized attention with positive features, timed
as compiled programs (median of ``--repeats``), with XLA's memory estimate:

- ``fft``: ``rfa.kernelized_attention(..., relative_bias=b)`` with the Toeplitz sums by FFT at every length
  (Luo et al., NeurIPS 2021): O(L log L · F · d) time, O(L · F · d) memory. The library itself forms the L × L
  weights below ``rfa.attention.kernelized.relative.FFT_FROM_LENGTH``, where they are cheaper;
- ``dense``: ``rfa.attention.naive_kernelized_attention(..., relative_bias=b)``, the L × L weights formed with
  ``exp(b[L − 1 + i − j])`` and masked: O(L² · (F + d)) time, O(L²) memory (up to ``--dense_max``);
- ``no bias``: the chunked causal form without a bias, the cost the bias adds to.

Writes JSON (``--output``, default ``<workdir>/benchmark_relative.json``) with the log-log slopes of time
against L, and a figure beside it. CPU timings are ratios within one run; absolute ones count on a GPU.
"""
