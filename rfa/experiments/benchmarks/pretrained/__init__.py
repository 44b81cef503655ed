"""Prefill and decoding throughput of each pretrained family, beside transformers' own ``generate``.

Run: ``rfa benchmark pretrained``. Each family of :mod:`rfa.models.pretrained` (Qwen3, Qwen3.5, Qwen3.5 MoE,
Qwen3-Next, Kimi Linear) at a small realistic size (4 layers, hidden 512, 8 query heads of 64, a vocabulary of
32,768; the hybrids' three linear layers to one of full attention, the mixtures' 8 experts of which 2 per token),
random weights drawn by rfa, float32. For each batch B and prompt length P (cases with B · P above
``--max_tokens`` are skipped: an exact layer's scores over a long batch would not fit this machine's memory twice),
both libraries decode greedily through their user-facing call: rfa's :func:`rfa.models.decoding.generate` (one
jitted program: prefill, then a ``lax.scan`` of decoding steps) and, where PyTorch and transformers are installed,
``model.generate`` of the same weights (written by :func:`rfa.models.save_pretrained`, read by transformers'
``from_pretrained``). Both are timed generating 1 token and ``1 + --new_tokens``, every case in turn (median of
``--repeats``): prefill throughput is ``B · P / t(1)``, decoding throughput ``B · new_tokens / (t(1 + new) − t(1))``.
transformers on CPU runs its PyTorch paths (its Gated DeltaNet and KDA fall back to their reference chunked forms
without fla's kernels, as its log says).

Writes JSON (``--output``, default ``<workdir>/benchmark_pretrained.json``), a markdown table and a figure beside it.
CPU timings are ratios within one run.
"""
