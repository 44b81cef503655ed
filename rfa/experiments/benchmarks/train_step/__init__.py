"""The training step of every attention kind of the comparison tables, timed side by side in one process.

Run: ``rfa benchmark train_step`` (``make benchmark``). For each study config of ``--configs`` (by default the sort
table's, ``compare_kernels:sort``, and the recall tables', ``recall``, ``recall:pairs4_l64`` and
``recall:pairs4_l128``), every setting the study trains (each kind, at each of its m) is built as the study builds
it (the same task config, scale, m and decoder depth) and one optimizer step (forward, backward, AdamW) of it is
compiled as ``rfa train`` compiles it, on one batch of the task's training data. All of them, of every config, are
then timed in turns in this one process: each round runs every setting once, in a new random order, and each
setting's time is the median of ``--repeats`` rounds, so that the machine's noise falls on every kind alike. Step
times recorded by training runs made at different times beside other jobs cannot be compared; these can, and the
tables' cost columns (:mod:`rfa.experiments.tables`) read them from this JSON. Unless ``--huge_pages=false``, it
re-executes itself with glibc asking for transparent huge pages
(:mod:`rfa.experiments.common.host_memory`), so that the kernel's page faults, a third of
a recall step's CPU time with glibc's defaults, do not stand in for the kinds' costs.

Where a config's model is a decoder (the recall configs), each setting's decoding is timed too, in turns in a second
round of the same kind: ``--decode_steps`` tokens decoded in one jitted scan (as
:func:`rfa.experiments.common.timing.compiled_decoder` times rfa's kinds) at the end of a sequence of the
config's length, batch 1, from the cache the setting's model keeps (exact attention's keys and values of every
token so far, a kernelized state, the delta rule's state). That is the cost per generated token that the state size
beside it in the recall tables buys.

JSON: under ``configs``, per study config, ``seconds_per_step`` (``{setting: seconds}``, a setting named
``<attention>`` or ``<attention>_m<m>`` as :func:`rfa.experiments.common.report.setting_name` names it), ``settings``
(each one's attention, m, task, batch and length) and ``ratios`` (``<setting>_over_exact``: its time over exact
attention's in the same config, which the speed guard compares); for a decoder's config, ``seconds_per_token``
and ``decode_ratios`` (the same, of a decoded token).
"""
