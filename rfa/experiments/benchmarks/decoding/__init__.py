"""Time per decoded token against position through rfa's models: exact attention (a KV cache) and every stateful kind.

Run: ``rfa benchmark decoding`` (``make benchmark``). A ``tiny`` decoder-only model (d_model 32, 4 heads, 2 layers)
decodes tokens from positions 128 .. 8192, batch 1, for each kind of :data:`KINDS`. The exact model's KV cache holds
only the tokens up to the last timed one (``position + steps`` slots), so its step costs O(position); every other
kind keeps a state of fixed size (kernelized attention's ``(S, z)``, gated or not, per head or per feature; the delta
rule's ``S`` and convolution history; the window's ring of 64 keys and values), so its step should cost the same at
any position (target: time at 8192 <= 1.2x time at 128). The hybrid (Gated DeltaNet below an exact layer) has one
exact layer, so its step grows with position, at about half exact attention's rate.

Each timing decodes ``--steps`` tokens in one jitted ``lax.scan`` (as ``rfa.models.decoding.generate`` does), so
Python dispatch is not counted; median of ``--repeats`` calls, every (kind, position) timed in turn in a new random
order each round, so that the machine's drift falls on every position alike (per-token times of 10–50 µs are at
its noise). Each kind is compiled twice, as shipped and traced inside ``rfa.checks.enabled(False)`` (the same step
without any run-time check, as ``generate``'s loop runs it), and the two are timed in turns:
``ratios/checks_over_unchecked`` is what the checks cost a decoded token of one's own loop (target, until the
models' ``decode_step`` checked its token's ids and its position under ``jit``: within 10%; the committed figures
are of the steps before, which checked nothing of their own). ``ratios/over_kernelized`` divides a kind's time per
token by ungated kernelized attention's at the same position (the median over the positions): ratios of one run,
which the speed guard (``rfa.experiments.benchmarks.guard``) compares against the committed figures, so a kind whose
step slows (as the gated kinds' did, 10-45x, when each token made host calls) is flagged. Writes JSON.
"""
