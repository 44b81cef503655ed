"""The cost of rfa's run-time checks under ``jit`` (:mod:`rfa.checks`) on the normal path.

Run: ``rfa benchmark checks`` (``make benchmark``). Each workload is a jitted training-like
step whose checks cannot be decided while tracing, so each compiles a check (``rfa.checks.raise_if``: a
``lax.cond`` on the condition, with a host callback that runs when it fails):

- ``traced mask``: forward and backward of kernelized attention with a Flax padding mask built inside the step
  (the mask's pattern is read at run time);
- ``traced log_decay``: forward and backward of gated causal attention (``log_decay`` from a gate);
- ``forecaster``: a forecaster's forward pass (its input is checked for NaN).

Each is compiled twice from the same function: as shipped, and traced inside ``rfa.checks.enabled(False)`` (the
same program without the checks). Timings alternate between the two, median of ``--repeats``; the ratio is the
checks' cost. Writes JSON to the workdir.
"""
