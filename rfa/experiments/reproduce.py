"""The main job: runs every reproduction (quick variants by default) and writes an index report.

Run: ``rfa reproduce --workdir workdir/reproduce`` (``make reproduce``);
``--variant=full`` runs the full sweeps. Each reproduction gets ``<workdir>/<variant>/<name>/``
with its own ``report.md``, ``results.csv`` and figures (see ``rfa.experiments.sweep``);
``<workdir>/<variant>/report.md`` opens with one verdict line per reproduction (reproduced or not,
against which published values) and links the reports. Re-running resumes every sweep from its
workdir.
"""

from __future__ import annotations

import os

from absl import app, flags

from rfa.experiments.common.cli import run_main
from rfa.experiments.sweep_framework import registry
from rfa.experiments.sweeps import Outputs, run  # the shipped kinds and reproductions, registered
from rfa.workdir import import_modules, write_atomic

_WORKDIR = flags.DEFINE_string("workdir", "workdir/reproduce", "Parent directory of the reproductions' workdirs.")
_VARIANT = flags.DEFINE_string("variant", "quick", "Config variant to run: 'quick' (minutes) or 'full'.")
_ONLY = flags.DEFINE_list("only", [], "Reproductions to run (default: every registered one).")
_MODULES = flags.DEFINE_list("modules", [], "Modules to import first (from the current directory too): your own.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Where a reproduction that trains a model prepares its dataset (default: <workdir>/data)."
)


def run_all(
    names, variant: str, workdir: str, *, data_dir: str | None = None, progress: bool = True
) -> tuple[str, dict[str, Outputs]]:
    """Runs each reproduction's config in ``variant`` into ``<workdir>/<variant>/<name>`` and writes the index.

    Args:
      names: registered reproductions to run (``rfa.experiments.sweep_framework.registry``; the shipped ones have
        ``rfa/configs/sweeps/<name>.py``).
      variant: the config variant, ``"quick"`` or ``"full"``.
      workdir: parent of the variant's directory.
      data_dir: the TFDS data_dir of the reproductions that train a model (default ``<workdir>/data``: the main
        job writes nothing outside its workdir).
      progress: show a progress bar per reproduction.

    Returns:
      the index's path and each reproduction's outputs.

    Example:
      >>> index, outputs = run_all(["performer_fig2"], "quick", "/tmp/reproduce")
      >>> outputs["performer_fig2"].verdict.reproduced
      True
    """
    outputs, links = {}, []
    for name in names:
        config = registry.reproduction(name).get_config(variant)
        if "data_dir" in config:
            config.data_dir = data_dir or os.path.join(workdir, "data")
        outputs[name] = out = run(config, os.path.join(workdir, variant, name), progress=progress)
        figures = ", ".join(f"[{os.path.basename(f)}]({name}/{os.path.basename(f)})" for f in out.figures)
        links.append(f"- **{name}**: [report]({name}/report.md), [results.csv]({name}/results.csv); figures: {figures}")
        print(f"{out.verdict.line(name) if out.verdict else name}\n    {out.report}")
    verdicts = [f"- {out.verdict.line(name)}" for name, out in outputs.items() if out.verdict is not None]
    index = os.path.join(workdir, variant, "report.md")
    text = [f"# rfa reproductions ({variant} variants)", "\n".join(verdicts), "## Reports", "\n".join(links)]
    write_atomic(index, "\n\n".join(text) + "\n")
    return index, outputs


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    import_modules(_MODULES.value)
    known = registry.registered_reproductions()
    unknown = sorted(set(_ONLY.value) - set(known))
    if unknown:
        raise app.UsageError(f"unknown reproductions {unknown}; choose from {list(known)}.")
    index, _ = run_all(_ONLY.value or known, _VARIANT.value, _WORKDIR.value, data_dir=_DATA_DIR.value)
    print(f"\nIndex of the reports and figures: {index}")


if __name__ == "__main__":
    run_main(main)
