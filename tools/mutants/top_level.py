"""Mutants of the modules at rfa/'s top level: the run-time checks (checks.py), the work directory
(workdir.py) and the renamed keywords (_validation.py).

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant

MUTANTS = [
    # The bugs an audit found passing every test (issue 14).
    Mutant(
        "write-not-atomic",
        "rfa/workdir.py",
        '        with open(tmp, "w") as f:\n            f.write(text)\n        os.replace(tmp, path)\n',
        '        with open(path, "w") as f:\n            f.write(text)\n',
        ("tests/experiments/test_sweep.py",),
        "results written in place: a kill leaves half a file",
    ),
    # Runners.
    Mutant(
        "config-change-ignored",
        "rfa/workdir.py",
        "        if not is_execution(key) and old.get(key) != new.get(key)",
        "        if not is_execution(key) and old.get(key) != new.get(key) and False",
        ("tests/experiments/test_sweep.py",),
        "a workdir of another config is resumed as if it were the same",
    ),
    Mutant(
        "config-modules-not-imported",
        "rfa/workdir.py",
        "            importlib.import_module(name)",
        "            pass",
        ("tests/experiments/test_runner.py::test_a_users_estimators_run_from_a_module_named_in_the_config",),
        "the runner ignores config.modules: a user's estimator is unknown",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "run-time-check-silent",
        "rfa/checks.py",
        "        jax.debug.callback(report, failed, *values, partitioned=True)\n",
        "        pass\n",
        ("tests/test_checks.py",),
        "raise_if never raises under jit",
    ),
    Mutant(
        "run-time-check-on-one-device",
        "rfa/checks.py",
        "        jax.debug.callback(report, failed, *values, partitioned=True)\n",
        "        jax.debug.callback(report, failed, *values)\n",
        (
            "tests/attention/test_sequence_parallel.py::"
            "test_a_traced_mask_the_layer_cannot_apply_raises_its_eager_error_on_8_devices",
        ),
        "a failed check stops one device of eight; the others wait at a collective until XLA aborts the process",
    ),
    Mutant(
        "check-host-side-dispatches-jax",
        "rfa/checks.py",
        "        if np.asarray(failed).any():\n",
        "        if np.any(failed):\n",
        ("tests/test_checks.py::test_jitted_checked_calls_beside_eager_ops_do_not_freeze",),
        "the callback calls the jax.Array's .any(), a JAX dispatch from XLA's callback thread: loops freeze on 2 cores",
    ),
    Mutant(
        "check-failure-logged",
        "rfa/checks.py",
        "        return not getattr(error, _CHECK_FAILURE, False)\n",
        "        return True\n",
        ("tests/test_checks.py::test_a_caught_check_error_prints_nothing",),
        "a caught check error prints JAX's traceback to stderr",
    ),
    Mutant(
        "checks-switch-ignored",
        "rfa/checks.py",
        "    if _VALUE_CHECKS.value:\n",
        "    if True:\n",
        (
            "tests/test_checks.py::test_the_switch_turns_the_checks_of_values_off_eagerly_and_under_jit_and_keeps_shape_checks",
        ),
        "rfa.checks.enabled(False) checks all the same",
    ),
    Mutant(
        "model-cores-checked",
        "rfa/checks.py",
        "    with enabled(False):\n        return fn(*args, **kwargs)\n",
        "    return fn(*args, **kwargs)\n",
        ("tests/models/test_no_host_calls.py",),
        "every decoded token of a gated kind makes host calls for values in range by construction",
    ),
    Mutant(
        "nan-checks-never-on",
        "rfa/checks.py",
        "    if not _NAN_CHECKS.value:\n        return\n",
        "    return\n",
        ("tests/test_checks.py",),
        "nan_checks() checks nothing",
    ),
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "checked-passes-the-runtime-error",
        "rfa/checks.py",
        "            if _failures:\n                raise _failures[-1] from runtime_error\n",
        "",
        ("tests/attention/test_masks.py",),
        "rfa.checks.checked lets a failed check out as JaxRuntimeError, not rfa.InputError",
    ),
    # The keywords renamed in 0.3 (kind=, projection=) keep working for one release.
    Mutant(
        "renamed-keyword-dropped",
        "rfa/_validation.py",
        "                kwargs[new] = kwargs.pop(old)\n",
        "                kwargs.pop(old)\n",
        (
            "tests/random_features/test_projections.py::test_the_keyword_of_before_0_3_draws_the_same_rows_with_a_warning",
            "tests/random_features/test_theory.py::test_the_keyword_of_before_0_3_gives_the_same_closed_form_with_a_warning",
        ),
        "an old keyword is dropped with its warning instead of passed on under its new name",
    ),
]
