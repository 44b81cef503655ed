"""The delta rule's precision policy: bfloat16 operands with a float32 state against float32, in time and error.

Run: ``rfa benchmark precision``. For each kind (``deltanet``: no decay; ``gated_deltanet``: one decay per token;
``kda``: one per key channel) and length, at ``[1, L, 8, 64]`` on inputs rounded to bfloat16 once (so that both
runs see the same numbers):

- ``float32``: :func:`rfa.attention.delta_rule_attention`, chunks of 64, everything float32;
- ``bfloat16``: the same with bfloat16 inputs and ``compute_dtype=jnp.bfloat16``: the chunk's matmuls on bfloat16
  operands summed in float32, the state, the decays, their sums and the triangular solve float32.

Each is timed forward and backward (gradients to q, k, v, β and the log-decays), as compiled programs (median of
``--repeats``, the two in turns); the errors are the relative RMS of the bfloat16 run's output and final state
against float32's. One more error, ``decode``: the recurrent form token by token over the length (the decoding
form), its state carried in float32 (the policy) or rounded to bfloat16 after every token (a cache kept in
bfloat16), against the float32 chunked run, with weak decays (log-decays in [−0.001, 0], where a decay factor
rounds to 1 in bfloat16).

Writes JSON (``--output``, default ``<workdir>/benchmark_precision.json``; ``ratios``: bfloat16's time over
float32's, which the speed guard compares) and a markdown table beside it. CPU timings are ratios within one run:
XLA:CPU has no bfloat16 matmul units and converts the operands, so the CPU gives bfloat16's cost, not its gain.
"""
