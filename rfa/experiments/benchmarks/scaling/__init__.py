"""Model-level cost against length: one training step of exact vs kernelized Transformers.

Run:
  rfa benchmark scaling
  rfa benchmark scaling --lengths 1024,2048,4096 --output /tmp/scaling.json

Models (batch 1, float32, d_model 64, 4 heads of 16, MLP 128, 2 layers (``--num_layers``), vocabulary 256): a
decoder language model (causal self-attention) and an encoder classifier (bidirectional, mean pooling).
Kinds (``--kinds``, all by default; each model times those of them it has): ``exact`` (softmax), ``positive``
(m = 64 positive random features) and, for the decoder, ``gated`` (positive features with a learned decay gate).
A step is the jitted, donated ``value_and_grad`` of the cross-entropy plus an Adam update (``nnx.Optimizer``),
compiled ahead of time; peak memory is XLA's estimate for that program (arguments + outputs + temporaries −
aliased), time the median of ``--repeats`` calls after a warm-up. A case whose estimated peak exceeds
``--max_memory_gib`` is skipped, not run (exact attention stores L² scores per head and layer).

Slopes are least-squares fits of log(time) and log(memory) against log(L) over the lengths from
``--fit_from`` on (the small lengths are dominated by fixed costs): about 1 for linear cost, 2 for
quadratic. The crossover is the first length from which a kernelized kind's step is faster than
exact's at every longer length (where exact was skipped for memory, kernelized counts as faster).
Writes JSON (``--output``) and a log-log figure beside it (``.png``).

Per-device memory against the number of devices P that split the sequence (``--sequence_devices``):
  XLA_FLAGS=--xla_force_host_platform_device_count=8 rfa benchmark scaling \
      --sequence_devices 1,2,4,8 --sequence_length 16384
compiles the same steps of the decoder at one length on a mesh whose ``sequence`` axis has P devices
(kernelized sites exchange states, :func:`rfa.attention.sequence_parallel_attention`; XLA splits the
rest, exact attention included) and reports XLA's per-device peak for each P. It times nothing: the
host-platform devices share this machine's cores. Writes ``--sequence_output`` and a figure beside it.
"""
