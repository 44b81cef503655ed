"""The ``rfa`` command: its subcommands, the studies and benchmarks it finds by name, and the 0.2 module names a
checkout keeps for one release."""

import os
import pathlib
import subprocess
import sys

import pytest

from rfa.experiments import command
from rfa.experiments.common import host_memory
from rfa.experiments.common.legacy import new_name

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUDIES = {"compare_kernels", "distillation", "estimators_in_models", "forecasting", "length_generalization", "recall"}


def test_studies_and_benchmarks_are_the_runnable_modules_of_their_packages():
    studies = command.runnable_modules("rfa.experiments.studies")
    assert set(studies) == STUDIES
    assert studies["recall"].startswith("Associative recall against recurrent state size")
    benchmarks = command.runnable_modules("rfa.experiments.benchmarks")
    assert {"attention", "decoding", "delta_rule", "mse"} <= set(benchmarks)
    assert not {"guard"} & set(benchmarks)  # a helper, not a command


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        ([], command.USAGE_STATUS, "usage: rfa SUBCOMMAND"),
        (["nope"], "rfa: no subcommand 'nope'", None),
        (["study"], command.USAGE_STATUS, "length_generalization"),
        (["study", "lengths"], "rfa study: no study 'lengths'", None),
    ],
)
def test_a_wrong_invocation_says_what_there_is(argv, status, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        command.main(argv)
    code = exit_.value.code  # a status, or the message (status 1) that begins with what is wrong
    assert code == status if isinstance(status, int) else code.startswith(status)
    if says is not None:
        assert says in capsys.readouterr().err


def test_the_old_module_names_map_to_the_new_ones():
    assert new_name("experiments.studies.lengths") == "rfa.experiments.studies.length_generalization"
    assert (
        new_name("experiments.studies.estimators_in_models") == "rfa.experiments.studies.estimators_in_models.measure"
    )
    assert new_name("experiments.studies.estimators") == "rfa.experiments.studies.estimators_in_models"
    assert new_name("experiments.report") == "rfa.experiments.common.report"  # the helpers, moved in 0.3 too
    assert new_name("experiments.sweeps.checks") == "rfa.experiments.sweep_framework.config_checks"
    assert new_name("experiments.benchmarks.attention") == "rfa.experiments.benchmarks.attention"
    assert new_name("configs.forecast") == "rfa.configs.studies.forecasting"
    assert new_name("configs.common") == "rfa.configs.common"
    assert new_name("configs.mqar") == "rfa.configs.tasks.mqar"


@pytest.mark.slow
def test_the_old_commands_and_imports_still_work_from_a_checkout():
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    done = run("-m", "experiments.studies.lengths", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "length_generalization" in done.stdout and "--workdir" in done.stdout
    same = "import configs.sort, rfa.configs.tasks.sort as new; print(configs.sort is new)"
    done = run("-W", "always::DeprecationWarning", "-c", same)
    assert done.stdout.strip() == "True" and "rfa.configs.*` since rfa 0.3" in done.stderr


def test_configs_lists_what_each_attention_variant_sets_and_answers_help(capsys):
    from rfa.train import ATTENTION_VARIANTS

    command.main(["configs"])
    listing = capsys.readouterr().out.splitlines()
    assert "tasks: " in listing[0] and "sort" in listing[0].split()
    assert "  hybrid_kda               kind='kda', layers=('kda', 'kda', 'kda', 'exact')" in listing
    assert "  gated_deltanet_positive  kind='gated_deltanet', qk_map='positive'" in listing
    assert sum(line.startswith("  ") for line in listing) == len(ATTENTION_VARIANTS)  # one line per variant
    command.main(["configs", "--help"])
    assert capsys.readouterr().out.startswith("usage: rfa configs")
    with pytest.raises(SystemExit, match="rfa configs takes no arguments, got 'sort'"):
        command.main(["configs", "sort"])


class _ProcessReplacedError(Exception):
    """What the recorded ``os.execve`` raises: the process would have been replaced here."""


@pytest.mark.parametrize(
    ("argv", "tunables", "executed"),
    [
        (["train", "--config", "sort:exact"], None, True),
        (["study", "recall", "--help"], None, True),
        (["benchmark", "decoding"], None, False),  # each benchmark decides for itself
        (["train", "--config", "sort:exact"], "", False),  # the user's own tunables, even none, are kept
    ],
)
def test_the_command_reexecutes_itself_with_huge_pages_once(argv, tunables, executed, monkeypatch):
    calls = []

    def execve(path, arguments, environment):
        calls.append((path, arguments, environment))
        raise _ProcessReplacedError

    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(command, "runpy", None)  # past the re-execution nothing may run
    monkeypatch.setattr(sys, "argv", ["rfa", *argv])
    monkeypatch.setattr(sys, "path", [str(ROOT / "bin"), *sys.path[1:]])  # the console script's directory first
    if tunables is None:
        monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    else:
        monkeypatch.setenv("GLIBC_TUNABLES", tunables)
    with pytest.raises(_ProcessReplacedError if executed else AttributeError):
        command.main()
    if executed:
        ((path, arguments, environment),) = calls
        # -P: the new process puts no directory of its own first, so none named rfa where it runs shadows this rfa
        assert [path, *arguments] == [sys.executable, sys.executable, "-P", "-m", "rfa.experiments", *argv]
        assert environment["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    else:
        assert not calls
    with pytest.raises(AttributeError):  # called with its arguments (from Python), it never replaces the process
        command.main(["train", "--config", "sort:exact"])


def test_the_reexecution_keeps_the_first_directory_only_where_the_running_rfa_came_from(monkeypatch, tmp_path):
    """``python -m rfa.experiments`` from an uninstalled checkout's root imports rfa from the current directory,
    so its re-execution keeps it; anywhere else (a console script's directory, another one) it passes ``-P``."""
    parent = pathlib.Path(host_memory.RFA_PARENT)
    for first, flags in ((str(parent), []), (str(parent / "rfa"), ["-P"]), (str(tmp_path), ["-P"]), ("", ["-P"])):
        monkeypatch.setattr(sys, "path", [first, *sys.path[1:]])
        monkeypatch.chdir(tmp_path)  # "" (python -c) is the current directory
        assert host_memory.safe_path_flags() == flags, first
    monkeypatch.chdir(parent)
    assert host_memory.safe_path_flags() == []


CONSOLE_SCRIPT = "import sys\nfrom rfa.experiments.command import main\nsys.argv[0] = 'rfa'\nsys.exit(main())\n"
"""What pip writes as the ``rfa`` console script (``rfa.experiments.command:main``)."""

USER_SWEEP = """
from rfa.configs.sweeps import performer_lemma2


def get_config(variant=None):
    config = performer_lemma2.get_config("quick")
    config.modules = ("my_module",)  # imported from the current directory
    config.estimators, config.num_features, config.repetitions = ("positive",), (8,), 200
    config.geometry.norms, config.geometry.angles = (0.5,), (60.0,)
    return config
"""


@pytest.mark.slow  # two commands, each re-executing itself with huge pages: four interpreters (about 15 s)
def test_the_command_runs_its_rfa_from_a_directory_holding_one_named_rfa(tmp_path):
    """``rfa`` started where a directory named ``rfa`` stands (a checkout's root, a project of the user's; here a
    decoy that raises when imported) runs the rfa it was started with, through its re-execution with huge pages
    (``python -m`` puts the current directory first); a config file and ``config.modules`` from that directory,
    deliberate imports from it, still work. Before the fix: "No module named 'rfa.experiments.legacy'"."""
    here, scripts = tmp_path / "here", tmp_path / "bin"
    (here / "rfa" / "experiments").mkdir(parents=True)
    for decoy in ("rfa/__init__.py", "rfa/experiments/__init__.py"):
        (here / decoy).write_text("raise ImportError('the rfa of the current directory was imported')\n")
    (here / "my_module.py").write_text("import pathlib\n\npathlib.Path('my_module_was_imported').touch()\n")
    (here / "my_sweep.py").write_text(USER_SWEEP)
    scripts.mkdir()
    (scripts / "rfa").write_text(CONSOLE_SCRIPT)
    env = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}  # so that it re-executes
    env["PYTHONPATH"] = os.pathsep.join([host_memory.RFA_PARENT, *filter(None, [env.get("PYTHONPATH")])])

    def rfa(*args):
        done = subprocess.run(
            [sys.executable, str(scripts / "rfa"), *args],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0 and "current directory was imported" not in done.stderr, done.stderr[-3000:]
        return done.stdout

    assert "--workdir" in rfa("train", "--help")
    assert "Report:" in rfa("sweep", "--config", "my_sweep.py", "--workdir", "sweep")
    assert (here / "my_module_was_imported").exists() and (here / "sweep" / "report.md").exists()
