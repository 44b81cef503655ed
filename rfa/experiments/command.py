"""The ``rfa`` command: one console script whose subcommands are rfa's command lines.

  rfa train --config sort:positive,quick --workdir workdir/sort
  rfa sweep --config performer_fig2:quick --workdir workdir/fig2
  rfa reproduce --workdir workdir/reproduce
  rfa study recall --workdir workdir/recall      (rfa study: the list of studies)
  rfa benchmark attention                         (rfa benchmark: the list of benchmarks)
  rfa decode | tables | prepare-data ...
  rfa configs                                     (the shipped configs, by group)

``rfa SUBCOMMAND ARGS`` is ``python -m MODULE ARGS`` with the module of :data:`COMMANDS` (``rfa study NAME`` is
``python -m rfa.experiments.studies.NAME``, ``rfa benchmark NAME`` ``python -m rfa.experiments.benchmarks.NAME``);
``python -m rfa.experiments`` is ``rfa``. Each subcommand's ``--help`` lists its flags. ``--config NAME`` names a
shipped config (:func:`rfa.experiments.common.cli.resolve_config`); a file of that path where you stand comes first.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import pkgutil
import runpy
import sys

from rfa.experiments.common.host_memory import reexecute_with_huge_pages

USAGE_STATUS = 2  # what command lines return for a wrong invocation
EXTRA = "rfa[experiments]"
COMMANDS = {  # subcommand: (the module it runs, or the package whose modules it runs by name; what it does)
    "train": ("rfa.experiments.train", "train one model from a config"),
    "decode": ("rfa.experiments.decode", "decode inputs with a trained model"),
    "sweep": ("rfa.experiments.sweep", "run a sweep of estimators (MSE, attention error, fits)"),
    "reproduce": ("rfa.experiments.reproduce", "run the reproductions of published comparisons"),
    "study": ("rfa.experiments.studies", "run a study: several trained models compared"),
    "benchmark": ("rfa.experiments.benchmarks", "time and measure rfa; writes JSON and figures"),
    "tables": ("rfa.experiments.tables", "rewrite results/*.md and figures from their JSON"),
    "prepare-data": ("rfa.experiments.prepare_data", "build the TFDS datasets of the tasks"),
}


def runnable_modules(package: str) -> dict[str, str]:
    """The modules of ``package`` that run as commands (``if __name__ == "__main__":``), with the first line of
    each one's docstring, read without importing them.

    Example:
      >>> "attention" in runnable_modules("rfa.experiments.benchmarks")
      True
    """
    found = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        spec = importlib.util.find_spec(f"{package}.{info.name}")
        path = os.path.join(spec.submodule_search_locations[0], "__main__.py") if info.ispkg else spec.origin
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as file:
            source = file.read()
        if 'if __name__ == "__main__":' in source:
            origin = spec.origin if info.ispkg else path  # a package's docstring is its __init__'s
            with open(origin, encoding="utf-8") as file:
                docstring = ast.get_docstring(ast.parse(file.read())) or ""
            found[info.name] = docstring.strip().split("\n")[0]
    return found


def usage() -> str:
    """The text of ``rfa --help``."""
    lines = ["usage: rfa SUBCOMMAND [ARGS]   (rfa SUBCOMMAND --help: its flags)", "", "subcommands:"]
    lines += [f"  {name:<13} {about}" for name, (_, about) in COMMANDS.items()]
    lines.append(f"  {'configs':<13} list the shipped configs, by group, and the attention variants")
    return "\n".join(lines)


def _group_usage(subcommand: str, package: str) -> str:
    names = runnable_modules(package)
    listed = "\n".join(f"  {name:<22} {about}" for name, about in sorted(names.items()))
    heading = package.rpartition(".")[2]  # studies, benchmarks
    return f"usage: rfa {subcommand} NAME [FLAGS]   (rfa {subcommand} NAME --help: its flags)\n\n{heading}:\n{listed}"


CONFIGS_USAGE = "usage: rfa configs   (the shipped configs, by group, and the fields each attention variant sets)"


def _configs() -> str:
    from rfa.experiments.common.cli import shipped_config_names
    from rfa.train import ATTENTION_VARIANTS

    lines = [f"{group}: {' '.join(names)}" for group, names in shipped_config_names().items()]
    lines += ["", "attention variants (a task's config string NAME:VARIANT; every other field keeps the task's value):"]
    for name, fields in ATTENTION_VARIANTS.items():
        lines.append(f"  {name:<24} {', '.join(f'{field}={value!r}' for field, value in fields.items())}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Runs ``rfa ARGS`` (``argv``: the arguments after ``rfa``; default ``sys.argv[1:]``).

    Started as the command (``argv`` None), a subcommand other than ``benchmark`` first re-executes itself with
    glibc asking for transparent huge pages (:mod:`rfa.experiments.common.host_memory`: a CPU training step without the
    kernel's page faults); each benchmark says for itself whether it times with them."""
    command = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        sys.exit(0 if argv else USAGE_STATUS)
    subcommand, rest = argv[0], argv[1:]
    if subcommand not in COMMANDS and subcommand != "configs":
        sys.exit(f"rfa: no subcommand {subcommand!r}\n\n{usage()}")
    if importlib.util.find_spec("absl") is None or importlib.util.find_spec("ml_collections") is None:
        sys.exit(f"rfa {subcommand} needs rfa's experiments: pip install '{EXTRA}'")
    if subcommand == "configs":
        if rest and rest[0] in ("-h", "--help"):
            print(CONFIGS_USAGE)
        elif rest:
            sys.exit(f"rfa configs takes no arguments, got {' '.join(rest)!r}\n\n{CONFIGS_USAGE}")
        else:
            print(_configs())
        return
    module, _ = COMMANDS[subcommand]
    if command and subcommand != "benchmark":
        reexecute_with_huge_pages(["-m", "rfa.experiments", *argv])
    if importlib.util.find_spec(module).submodule_search_locations is not None:  # a group: the next word names one
        if not rest or rest[0] in ("-h", "--help"):
            print(_group_usage(subcommand, module), file=sys.stdout if rest else sys.stderr)
            sys.exit(0 if rest else USAGE_STATUS)
        if rest[0] not in runnable_modules(module):
            sys.exit(f"rfa {subcommand}: no {subcommand} {rest[0]!r}\n\n{_group_usage(subcommand, module)}")
        module, subcommand, rest = f"{module}.{rest[0]}", f"{subcommand} {rest[0]}", rest[1:]
    sys.argv = [f"rfa {subcommand}", *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
