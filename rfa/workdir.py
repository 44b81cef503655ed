"""Run bookkeeping shared by every entry point: config variants, the workdir's config record, atomic writes.

A workdir holds everything one config produced. :func:`record_config` writes the config there
on the first run and, on every later run, refuses a config that differs in any field that
changes results (execution settings such as batch chunking or the device mesh may change), so
a run can never mix its outputs with, or overwrite, another config's.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable

import ml_collections


class ConfigError(ValueError):
    """A config that cannot run, or a workdir that holds another config's results."""


def apply_variant(config: ml_collections.ConfigDict, arg: str | None, variants: dict[str, dict]):
    """Sets the fields (dotted names allowed) of the variant named by a config string's ``:arg``.

    ``None`` or ``""`` selects ``"full"``; an unknown variant or field raises ``ConfigError``.

    Example:
      >>> import ml_collections
      >>> config = ml_collections.ConfigDict({"train": {"num_steps": 1000}})
      >>> apply_variant(config, "quick", {"full": {}, "quick": {"train.num_steps": 20}}).train.num_steps
      20
    """
    name = arg or "full"
    if name not in variants:
        raise ConfigError(f"unknown config variant {arg!r}; this config has {sorted(variants)}.")
    for field, value in variants[name].items():
        *parents, leaf = field.split(".")
        node = config
        for parent in parents:
            node = node[parent]
        if leaf not in node:
            raise ConfigError(f"variant {name!r} sets unknown config field {field!r}.")
        node[leaf] = value
    return config


def write_atomic(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` so that a reader (or a kill -9) never sees a partial file.

    The rename is atomic; there is no fsync, so a power cut (not a killed process) may lose the
    most recent files — they are then recomputed, never read half-written.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # interrupted (Ctrl-C, a full disk): leave the old file and no temporary behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_differences(old: dict, new: dict, *, execution_fields: tuple[str, ...] = ()) -> list[str]:
    """``field: old -> new`` for every field where two config dicts differ, except execution settings.

    An execution field ``"mesh"`` also covers every field under it (``"mesh.data"``).
    """
    old, new = _flatten(old), _flatten(new)

    def is_execution(key: str) -> bool:
        return any(key == field or key.startswith(f"{field}.") for field in execution_fields)

    return [
        f"{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}"
        for key in sorted(set(old) | set(new))
        if not is_execution(key) and old.get(key) != new.get(key)
    ]


def check_local(workdir: str) -> None:
    """Raises ``ConfigError`` for a workdir given as a URL (``gs://``, ``file://``): rfa writes a workdir's config,
    metrics and results with local file I/O, so a bucket must be mounted (gcsfuse) and given as its local path.

    Example:
      >>> check_local("gs://bucket/runs/sort")
      Traceback (most recent call last):
      ...
      rfa.workdir.ConfigError: workdir 'gs://bucket/runs/sort' is a URL: rfa writes its config, metrics and results ...
    """
    if "://" in workdir:
        raise ConfigError(
            f"workdir {workdir!r} is a URL: rfa writes its config, metrics and results with local file I/O. Give a "
            "local path: on several hosts, a shared filesystem or a bucket mounted on each (gcsfuse)."
        )


def record_config(
    workdir: str,
    config: ml_collections.ConfigDict,
    *,
    execution_fields: tuple[str, ...] = (),
    write: bool = True,
    upgrade: Callable[[dict], dict] | None = None,
) -> None:
    """Records ``config`` in ``<workdir>/config.json``, or raises ``ConfigError`` if the workdir holds another.

    The error lists the differing fields; nothing in the workdir is touched then. ``write=False``
    only checks (the non-primary processes of a multi-process run). ``upgrade`` reads a config saved by an
    earlier release in today's schema before comparing (renamed and added fields).
    """
    check_local(workdir)
    path = os.path.join(workdir, "config.json")
    config_dict = json.loads(config.to_json())
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        differences = config_differences(
            upgrade(saved) if upgrade else saved, config_dict, execution_fields=execution_fields
        )
        if differences:
            raise ConfigError(
                f"workdir {workdir!r} holds results of a different config; use another --workdir, or delete it "
                f"to start over. Differences (workdir -> this run): {'; '.join(differences)}."
            )
    if write:
        os.makedirs(workdir, exist_ok=True)
        write_atomic(path, json.dumps(config_dict, indent=2, sort_keys=True) + "\n")


def import_modules(names) -> None:
    """Imports the modules ``names`` (``config.modules``), from the current directory too, whose import registers
    the user's estimators, task kinds, tasks or reproductions; a ``ConfigError`` for one that does not import."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"config.modules: cannot import {name!r}: {error}") from error
