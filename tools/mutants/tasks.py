"""Mutants of rfa/tasks/: the tasks' inputs, losses and metrics.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "label-smoothing-halved",
        "rfa/tasks/common.py",
        "jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing)",
        "jax.nn.one_hot(labels, logits.shape[-1]), label_smoothing / 2)",
        ("tests/train/test_steps.py",),
        "label smoothing with half the configured mass",
    ),
    Mutant(
        "sequence-accuracy-counts-empty-rows",
        "rfa/tasks/seq2seq.py",
        "        present = weights.any(-1)\n",
        "        present = jnp.ones(weights.shape[:-1], bool)\n",
        ("tests/train/test_steps.py",),
        "all-padding rows count as sequences",
    ),
    # Training.
    Mutant(
        "teacher-forcing-without-bos",
        "rfa/tasks/seq2seq.py",
        "    return jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)",
        "    return jnp.concatenate([jnp.full_like(targets[:, :1], 0), targets[:, :-1]], axis=1)",
        ("tests/train/test_steps.py",),
        "the decoder's first input is padding, not BOS",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "lookback-error-unnamed",
        "rfa/tasks/forecast.py",
        "        if max_length + horizon > len(values):\n",
        "        if False:\n",
        ("tests/train/test_commands.py::test_entry_points_report_bad_input_without_a_traceback",),
        "a lookback longer than the series fails without naming config.max_length and config.model.horizon",
    ),
    # Claims everywhere (issue 57).
    Mutant(
        "recall-counts-every-position",
        "rfa/tasks/lm.py",
        '(batch["targets"] != PAD_ID).astype(jnp.float32)',
        'jnp.ones(batch["targets"].shape, jnp.float32)',
        ("tests/data/test_mqar.py",),
        "MQAR accuracy counts the random filler tokens too",
    ),
]
