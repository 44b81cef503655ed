"""ml-collections configs shipped with rfa, by group: ``tasks`` (one training task each, with a variant per
attention kind), ``sweeps`` (estimator sweeps and reproductions) and ``studies`` (one per study of
``rfa.experiments.studies``, under the study's name). Each is ``get_config(arg)`` with variants chosen by ``arg``;
a command line names one by its name (``--config sort:positive,quick``). Importing this package imports nothing.
"""

from __future__ import annotations

import importlib
import importlib.util

GROUPS = ("tasks", "sweeps", "studies")
RENAMED = {"distill": "distillation", "forecast": "forecasting"}  # rfa 0.2's names, answered for one release


def find(name: str, groups: tuple[str, ...] = GROUPS) -> str | None:
    """The module of the shipped config ``name`` (the first of ``groups`` that holds it), or None.

    Example:
      >>> find("sort"), find("sort", groups=("sweeps",))
      ('rfa.configs.tasks.sort', None)
    """
    if not name.isidentifier():
        return None
    modules = (f"{__name__}.{group}.{name}" for group in groups)
    return next((module for module in modules if importlib.util.find_spec(module) is not None), None)


def load_task(task: str, arg: str | None = None):
    """The training config ``tasks/<task>.py`` with variant ``arg``; a ``rfa.workdir.ConfigError`` if rfa ships
    no such task.

    Example:
      >>> load_task("sort", "positive,quick").num_train_steps
      12
    """
    from rfa.workdir import ConfigError

    module = find(task, groups=("tasks",))
    if module is None:
        raise ConfigError(f"rfa ships no task config {task!r} (rfa/configs/tasks/{task}.py)")
    return importlib.import_module(module).get_config(arg)
