"""Training studies: each trains several models and compares them; one package per study, named for what it
studies, with its shipped config of the same name (``rfa/configs/studies/<name>.py``). A study's package holds its
description (the docstring, whose first line ``rfa study`` lists) and ``main(config, workdir, output)``; its
``__main__.py`` is its command line (:func:`run`), its ``measure.py`` trains and measures, and its ``report.py``
renders its tables and figures from its JSON alone, without JAX (``rfa tables`` renders them again).

  rfa study                                       the studies
  rfa study recall --config recall:pairs4_l64 --workdir workdir/recall
  python -m rfa.experiments.studies.recall ...    the same

Every study takes the same flags (:func:`run`): ``--config`` (default: its shipped config), ``--workdir`` (default
``workdir/<name>``) and ``--output`` (the JSON; default ``<workdir>/<name>.json``, with its ``.md`` table and
figures beside). A re-run resumes each training run from what is saved.
"""

from __future__ import annotations

import importlib
import os
import sys


def run(name: str) -> None:
    """The command line of the study ``name``: defines its flags and runs its package's ``main`` (a study's
    ``__main__.py``: ``if __name__ == "__main__": run("<name>")``).

    Example:
      >>> if __name__ == "__main__":
      ...     run("recall")
    """
    from absl import flags
    from ml_collections import config_flags

    from rfa.experiments.common.cli import run_main, run_training, shipped_config
    from rfa.experiments.common.report import output_path

    config = config_flags.DEFINE_config_file("config", shipped_config(name), f"The {name} study's config.")
    workdir = flags.DEFINE_string("workdir", os.path.join("workdir", name), "Parent of the training workdirs.")
    output = flags.DEFINE_string(
        "output", None, f"JSON of the results (.md, .png beside); default <workdir>/{name}.json"
    )
    for flag in ("config", "workdir", "output"):  # the flags --help lists: those of the command being run
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[flag])
    study = importlib.import_module(f"{__name__}.{name}")

    def main(argv):
        del argv
        run_training(study.main, config.value, workdir.value, output_path(output.value, workdir.value, f"{name}.json"))

    run_main(main)
