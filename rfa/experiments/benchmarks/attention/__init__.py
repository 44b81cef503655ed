"""Forward+backward time and peak memory of exact vs. kernelized attention.

Run:
  rfa benchmark attention
  rfa benchmark attention --lengths 4096,8192 --chunk_size 128 --skip_exact_above 0

Cases, all float32 with layout ``[batch, length, heads, head_dim]`` = ``[1, L, 8, 64]``:
  exact   ``jax.nn.dot_product_attention(q, k, v)`` (XLA implementation: materializes the L×L matrix);
  bidir   ``rfa.kernelized_attention(q, k, v, estimator="positive", projection=W)``, with
          ``W = rfa.sample_projection(jax.random.key(0), 256, 64)`` (m = 256 features);
  causal  the same with ``is_causal=True`` (chunked causal form, ``--chunk_size`` tokens per chunk).
  gated   causal with a per-token, per-head decay ``log_decay = log_sigmoid(a)`` (``a`` standard normal,
          an argument), differentiated with respect to it too: the decaying kernel of gated models.

Time. Each case is the jitted ``jax.value_and_grad`` of ``loss = sum(out * g)`` with respect to q, k
and v, for a fixed random ``g`` shaped like the output. q, k, v, g (and W) are arguments of the
compiled function, never compiled-in constants. Each function is compiled ahead of time and run
once to warm up. Then bidir, causal and gated are run in turns (bidir, causal, gated, bidir, ...), ``n`` times
each, so that a drift in a shared machine's speed falls on both and not on their ratio; exact is
timed on its own. Each call is timed to ``jax.block_until_ready``; the median and the minimum are
reported. ``n`` is ``--repeats``, reduced for slow cases so that a case spends about
``--time_budget_s`` seconds (at least ``--min_repeats`` runs).

Peak memory. From XLA's compiled memory analysis (``jit(f).lower(...).compile().memory_analysis()``):
``peak = argument_size_in_bytes + output_size_in_bytes + temp_size_in_bytes - alias_size_in_bytes``,
i.e. the inputs (q, k, v, g, W), the outputs (loss and the three gradients) and XLA's temporary
buffers of the whole forward+backward program; aliased bytes (0 here, nothing is donated) would be
counted twice otherwise. It is XLA's static buffer assignment for the backend in use (it differs
between CPU and GPU); a backend without memory analysis gives null. ``bytes / L`` per case shows
whether memory grows linearly.

FLOP estimates (GPU only; with B = batch, H = heads, m = features; products of dense contractions
only, elementwise work ignored), printed as achieved FLOP/s next to the FLOP/s of an
``--matmul_size``² float32 matmul timed in the same run (the reference "peak", default precision):
  exact   forward QKᵀ and PV: 4·L²·d·H; backward dV, dP, dQ, dK: 8·L²·d·H; total 12·B·H·L²·d.
  bidir   forward: projections φ(Q), φ(K) 2·2·L·m·d·H, φ(K)ᵀ[V, 1] and φ(Q)·KV 2·2·L·m·(d+1)·H;
          backward: input gradients of the projections 2·2·L·m·d·H (W is not differentiated), two
          gradients per contraction 2·4·L·m·(d+1)·H; total B·H·L·(8·m·d + 12·m·(d+1)).
  causal  bidir plus, per token, the intra-chunk scores φ(Q_c)φ(K_c)ᵀ 2·C·m·H and scores·[V, 1]
          2·C·(d+1)·H (C = chunk size), tripled for forward+backward; the prefix scan is ignored.

Host memory. XLA:CPU takes each large buffer fresh from the system, so with glibc's defaults every
64 MB intermediate costs ~16k page faults of 4 KiB: on a 2-core machine that kernel time was over
half of the kernelized forward+backward. Unless ``--huge_pages=false``, the benchmark
re-executes itself with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` so that glibc asks for
transparent huge pages (2 MiB pages: 512x fewer faults). It affects exact and kernelized alike and
only the process that measures. (Disabling mmap instead avoids the faults too but fragments the
heap until exact attention at L = 8192 runs out of memory.)

Estimators (``--estimators``, at ``--estimators_length``): the bidirectional forward+backward
of each listed estimator at the same m (rows of W; hybrid has 6m features), timed in turns with
the others and reported relative to positive features, with its random parameters drawn by
``fm.draw``. For the estimators that fit parameters from the data (oprf and the DERFs, fitted
inside the call), the jitted fit alone (``fm.fit`` of q and k scaled and head-major, as attention
hands them to it: one fit per batch row and head) is timed in turns with the estimator's
attention forward, and reported as a share of the forward and of the forward+backward.

Results are printed as markdown tables and written as JSON to ``--output`` (default
``<workdir>/benchmark_attention_<backend>.json``), with backend, device kind, jax version and date.
Timings on a shared CPU are noisy.
"""
