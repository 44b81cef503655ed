"""Mutants of rfa/experiments/ but its studies (experiments_studies.py): the command line, reports, seeds,
spreads, tables and styles, training, the sweeps, the benchmarks.

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import MULTIPROCESS

MUTANTS = [
    # Training.
    Mutant(
        "fig2-verdict-ignores-published",
        "rfa/experiments/sweeps/performer_fig2.py",
        "    return abs(theory / published - 1) <= FIG2_TOLERANCE",
        "    return True",
        ("tests/experiments/test_runner.py",),
        "Performer Fig. 2 counted as reproduced whatever the ratio",
    ),
    # The restructuring of release 0.2 (issue 26).
    Mutant(
        "output-flag-ignored",
        "rfa/experiments/common/report.py",
        "    return output or os.path.join(workdir, name)",
        "    return os.path.join(workdir, name)",
        ("tests/experiments/test_benchmark_smoke.py",),
        "--output is ignored: results go to the workdir only",
    ),
    Mutant(
        "renamed-study-config-not-found",
        "rfa/experiments/common/cli.py",
        "    module = configs.find(configs.RENAMED.get(stem, stem))\n",
        "    module = configs.find(stem)\n",
        ("tests/experiments/test_sweep.py::test_shipped_configs_are_found_by_name_where_no_such_file_exists",),
        "--config distill (0.2's name) is not found",
    ),
    Mutant(
        "shipped-configs-not-found",
        "rfa/experiments/common/cli.py",
        "    return value if shipped is None else shipped + colon + arg\n",
        "    return value\n",
        ("tests/experiments/test_sweep.py::test_shipped_configs_are_found_by_name_where_no_such_file_exists",),
        "--config <name> works only where a file of that name is",
    ),
    Mutant(
        "reproduction-requirements-ignored",
        "rfa/experiments/sweep_framework/registry.py",
        "    if missing:\n",
        "    if False:\n",
        ("tests/experiments/test_runner.py",),
        "a sweep lacking what its comparison needs gets its verdict",
    ),
    Mutant(
        "config-typo-traceback",
        "rfa/experiments/common/cli.py",
        '        sys.exit(f"error: {override_error(argv, error)}")\n',
        "        raise\n",
        ("tests/train/test_commands.py::test_entry_points_report_bad_input_without_a_traceback",),
        "a typo in a --config override prints a traceback",
    ),
    Mutant(
        "results-printed-by-every-process",
        "rfa/experiments/train.py",
        "    if jax.process_index() == 0:  # one copy of the results, however many processes\n",
        "    if True:  # one copy of the results, however many processes\n",
        (MULTIPROCESS,),
        "every process prints the results",
    ),
    # Evidence that discriminates (issue 29).
    Mutant(
        "population-standard-deviation",
        "rfa/experiments/common/spread.py",
        "values.std(ddof=1)",
        "values.std(ddof=0)",
        ("tests/experiments/test_spread.py",),
        "the spread over seeds divides by n instead of n - 1",
    ),
    # Evidence that holds up (issue 40).
    Mutant(
        "verdicts-without-holm",
        "rfa/experiments/common/spread.py",
        "        if p > alpha / (len(tested) - rank):\n",
        "        if p > alpha:\n",
        ("tests/experiments/test_spread.py", "tests/test_results_pages.py"),
        "a table's comparisons are not corrected for their number",
    ),
    Mutant(
        "verdicts-unpaired",
        "rfa/experiments/common/spread.py",
        "        if set(values) <= set(reference):\n",
        "        if False:\n",
        ("tests/experiments/test_spread.py", "tests/test_results_pages.py"),
        "runs that share seeds are compared as if they did not (Welch)",
    ),
    Mutant(
        "normal-quantile",
        "rfa/experiments/common/spread.py",
        "    half = float(stats.t.ppf(0.5 + LEVEL / 2, dof)) * error\n",
        "    half = 1.96 * error\n",
        ("tests/experiments/test_spread.py",),
        "the 95% interval takes the normal quantile whatever the seeds",
    ),
    # Claims everywhere (issue 57).
    Mutant(
        "decode-ratio-inverted",
        "rfa/experiments/benchmarks/train_step/__main__.py",
        'ratios: {} if reference is None else {f"{k}_over_exact": t / reference for k, t in times.items()},',
        'ratios: {} if reference is None else {f"{k}_over_exact": reference / t for k, t in times.items()},',
        ("tests/experiments/test_benchmark_smoke.py",),
        "the train_step benchmark's ratios (step and decoded token) divide exact attention's time by the kind's",
    ),
    Mutant(
        "delta-rule-ratio-inverted",
        "rfa/experiments/benchmarks/delta_rule/report.py",
        '    return row[top]["median_ms"] / row[bottom]["median_ms"]\n',
        '    return row[bottom]["median_ms"] / row[top]["median_ms"]\n',
        ("tests/test_results_pages.py",),
        "the delta-rule benchmark's ratios (its JSON and its CPU and GPU tables) divide the other way",
    ),
    Mutant(
        "cost-columns-from-the-runs",
        "rfa/experiments/tables.py",
        "    if key in STEP_TIMES:\n",
        "    if False:\n",
        ("tests/test_results_pages.py",),
        "the sort and recall tables take their step times from the runs again instead of the side-by-side benchmark",
    ),
    Mutant(
        "custom-sweep-gets-a-verdict",
        "rfa/experiments/sweep_framework/registry.py",
        "    if not changed:\n",
        "    if True:\n",
        ("tests/experiments/test_runner.py::test_a_users_estimators_run_from_a_module_named_in_the_config",),
        "a sweep with the user's own estimators is judged against the published values",
    ),
    Mutant(
        "figure-styles-cycle-ten",
        "rfa/experiments/common/styles.py",
        '            chosen[name] = (*KNOWN_STYLES[name], "-")',
        '            chosen[name] = (COLORS[KNOWN.index(name) % 10], "o", "-")',
        ("tests/experiments/test_styles.py",),
        "kinds take matplotlib's ten colors in turn: two share a style",
    ),
    Mutant(
        "figure-two-series-one-style",
        "rfa/experiments/common/styles.py",
        'HOLLOW = ("per_call",)',
        "HOLLOW = ()",
        ("tests/experiments/test_styles.py::test_a_committed_figure_can_be_read",),
        "an estimator's per-call and calibrated fits in one color and marker, told apart by the dash alone",
    ),
    Mutant(
        "every-seed-trains-the-first",
        "rfa/experiments/common/seeded.py",
        "        seeded.seed = seed\n",
        "        seeded.seed = seeds[0]\n",
        ("tests/test_docs.py::test_a_page_runs_as_written[howto/training.md]",),
        "the seeds of a study all train the same run: no spread",
    ),
]
