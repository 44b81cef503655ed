"""The kernel comparison on real tasks: train every (task, attention) pair and tabulate the results.

  python -m experiments.compare_kernels --workdir workdir/train [--tasks sort,listops] [--attention exact,positive]

Each pair trains from ``configs/<task>.py:<attention>`` in ``<workdir>/<task>/<attention>`` (a
finished pair is read back, an interrupted one resumes), then the table — task, attention, m,
final accuracy / perplexity, step time, tokens/s, XLA step memory, in the order of
``--attention`` (exact first by default) — is printed and written to ``--output`` (JSON) and beside it as markdown.
"""

from __future__ import annotations

import importlib
import os

from absl import app, flags, logging

from experiments.tables import markdown_table, write_json
from rfa.train import ATTENTION_VARIANTS, train_and_evaluate

TASKS = ("sort", "listops", "python_source")
ATTENTION = ("exact", "trig", "positive", "positive_iid", "hyperbolic", "oprf", "elu")

_WORKDIR = flags.DEFINE_string("workdir", "workdir/train", "Parent of the per-(task, attention) workdirs.")
_TASKS = flags.DEFINE_list("tasks", list(TASKS), "Config names under configs/.")
_ATTENTION = flags.DEFINE_list("attention", list(ATTENTION), f"Attention variants of {sorted(ATTENTION_VARIANTS)}.")
_DATA_DIR = flags.DEFINE_string("data_dir", "data", "TFDS data_dir.")
_OUTPUT = flags.DEFINE_string("output", "results/train_cpu.json", "JSON of the table ('' for none).")


def _number(value: float | None, scale: float, form: str) -> str:
    """``value * scale`` formatted, or "-" for a value the run did not measure (resumed after its last step)."""
    return "-" if value is None else form.format(value * scale)


def table(results: list[dict]) -> str:
    """Markdown: one row per run."""
    rows = []
    for r in results:
        score = r["eval"].get("sequence_accuracy", r["eval"]["accuracy"])
        rows.append([
            r["task"],
            r["attention"],
            "-" if r["num_features"] is None else str(r["num_features"]),
            f"{score:.3f}",
            f"{r['eval']['perplexity']:.2f}" if "perplexity" in r["eval"] else "-",
            _number(r["step_time_s"], 1e3, "{:.1f}"),
            _number(r["tokens_per_s"], 1e-3, "{:.0f}k"),
            _number(r["step_memory_bytes"], 2**-20, "{:.1f}"),
        ])  # fmt: skip
    header = ["task", "attention", "m", "accuracy", "perplexity", "step (ms)", "tokens/s", "step memory (MiB)"]
    return markdown_table(header, rows)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    results = []
    for task in _TASKS.value:
        module = importlib.import_module(f"configs.{task}")
        for attention in _ATTENTION.value:
            config = module.get_config(attention)
            config.data_dir = _DATA_DIR.value
            results.append(train_and_evaluate(config, os.path.join(_WORKDIR.value, task, attention)))
    text = table(results)
    print(text)
    write_json(_OUTPUT.value, results)
    if _OUTPUT.value:
        with open(os.path.splitext(_OUTPUT.value)[0] + ".md", "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    app.run(main)
