"""Mutants of rfa/train/: the training loop, its config, the optimizer, sharding, trained models rebuilt.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import MULTIPROCESS

LONGER_TEST = "tests/train/test_train.py::test_a_trained_model_is_rebuilt_for_longer_sequences_and_evaluated_on_them"

MUTANTS = [
    # Training.
    Mutant(
        "inverse-sqrt-schedule",
        "rfa/train/optim.py",
        "jnp.minimum(step**-0.5, step * max(warmup, 1) ** -1.5)",
        "jnp.minimum(step**-0.5, step * max(warmup, 1) ** -1.0)",
        ("tests/train/test_train.py::test_schedules_follow_their_formulas",),
        "the paper's warmup with the wrong power",
    ),
    Mutant(
        "interrupt-drops-metric-sums",
        "rfa/train/loop.py",
        "                    checkpoints.save(done, state, saved_position(), metrics=window)",
        "                    checkpoints.save(done, state, saved_position())",
        ("tests/train/test_train.py",),
        "an interrupted run loses the sums of the steps since the last log",
    ),
    Mutant(
        "signal-handlers-not-restored",
        "rfa/train/loop.py",
        "            signal.signal(signum, handler)",
        "            pass",
        ("tests/train/test_train.py",),
        "training leaves its SIGINT/SIGTERM handlers installed",
    ),
    Mutant(
        "resume-loses-data-position",
        "rfa/train/loop.py",
        "    if position is not None:\n        try:",
        "    if False:\n        try:",
        ("tests/train/test_train.py",),
        "a resumed run starts the data stream from the beginning",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "saved-projection-name-not-upgraded",
        "rfa/train/config.py",
        '        attention["projection_kind"] = attention.pop("projection")\n',
        '        attention["projection"] = attention.pop("projection")\n',
        ("tests/train/test_train.py::test_a_workdir_of_release_0_2_reads_back_in_todays_schema",),
        "a workdir of release 0.2 is refused as another config",
    ),
    Mutant(
        "feature-params-only-at-decoder-sites",
        "rfa/train/attention.py",
        "    attention = layer_site(a)\n",
        '    attention = layer_site(a if site != "encoder" else {**a, "feature_params": ()})\n',
        ("tests/train/test_train.py::test_a_fixed_feature_param_reaches_every_site",),
        "config.attention.feature_params is ignored at encoder sites",
    ),
    Mutant(
        "state-put-on-unaddressable-devices",
        "rfa/train/sharding.py",
        "    if jax.process_count() == 1:\n        return jax.device_put(tree, shardings)\n",
        "    if True:\n        return jax.device_put(tree, shardings)\n",
        (MULTIPROCESS,),
        "device_put to a mesh spanning processes: the launch fails at once (the original bug)",
    ),
    Mutant(
        "processes-stop-apart",
        "rfa/train/loop.py",
        "    if jax.process_count() == 1:\n        return received[0] if received else None\n",
        "    if True:\n        return received[0] if received else None\n",
        (MULTIPROCESS,),
        "SIGTERM stops only the process that got it; the other waits at the next collective",
    ),
    Mutant(
        "coordinator-not-probed",
        "rfa/train/sharding.py",
        '        if options["process_id"] != 0:  # JAX aborts',
        "        if False:  # JAX aborts",
        (
            "tests/train/test_multiprocess.py::test_a_process_that_cannot_reach_the_coordinator_fails_in_one_line_within_the_timeout",
        ),
        "a process with no coordinator dies in a C++ abort instead of one line",
    ),
    # Evidence that discriminates (issue 29).
    Mutant(
        "test-split-is-validation",
        "rfa/train/loop.py",
        "        test = evaluate(eval_step, state, task, config, mesh, task.test_split)",
        "        test = evaluate(eval_step, state, task, config, mesh, task.validation_split)",
        (
            "tests/train/test_train.py::test_validation_is_evaluated_while_training_and_test_once_on_the_final_checkpoint",
        ),
        "results.json's test metrics are the validation split's",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "longer-model-keeps-its-initialization",
        "rfa/train/trained.py",
        "    nnx.update(model, kept)\n    return model\n",
        "    return model\n",
        (LONGER_TEST,),
        "a model rebuilt for longer sequences loses its trained weights",
    ),
    Mutant(
        "longer-model-shapes-unchecked",
        "rfa/train/trained.py",
        "        if old.shape != new.shape:\n",
        "        if False:\n",
        (LONGER_TEST,),
        "learned positions are silently replaced by a table of another length",
    ),
    # A training config's attention from the registry (issue 68).
    Mutant(
        "config-size-dropped",
        "rfa/train/attention.py",
        '    if options.SIZE is not None and "num_features" in a:\n',
        "    if False:\n",
        ("tests/train/test_attention_config.py",),
        "attention.num_features sets no kind's size (a window keeps its default)",
    ),
    Mutant(
        "config-fit-at-decoder",
        "rfa/train/attention.py",
        "        options = options.for_state(head_dim)\n",
        "        options = options\n",
        ("tests/train/test_attention_config.py",),
        "a fitted parameter left to fit at a site that decodes from a state",
    ),
    Mutant(
        "config-gate-everywhere",
        "rfa/train/attention.py",
        'gated=bool(options.gated) and site == "decoder"',
        "gated=bool(options.gated)",
        ("tests/train/test_attention_config.py",),
        "the gate at the encoder and cross-attention too",
    ),
]
