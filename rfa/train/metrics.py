"""Training metrics: JSON lines and TensorBoard event files (tensorboardX, no TensorFlow), and a PNG of the curves.

Every record is ``{"step": s, "split": "train" | "validation", <metric>: value, ...}``, one line per
record in ``<workdir>/metrics.jsonl`` and a scalar ``<split>/<metric>`` in
``<workdir>/tensorboard``. A resumed run first drops the records written after the step it
resumes from (a killed run may have logged past its last checkpoint), so the file reads as one
uninterrupted run.

tensorboardX and matplotlib (about half a second of a command's start-up) are imported by the writer that writes
(process 0) and by :func:`plot_curves`, not with this module: a run stopped before its end, the other processes of a
multi-process run and the code that only reads metrics never use them.
"""

from __future__ import annotations

import json
import os

from rfa.workdir import write_atomic


def read_metrics(workdir: str) -> list[dict]:
    """The records of ``<workdir>/metrics.jsonl`` (an empty list if there are none)."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class MetricWriter:
    """Appends metric records to JSONL and TensorBoard; ``resume_step`` drops records after it.

    ``active=False`` (processes other than 0 of a multi-process run) writes nothing.

    Example:
      >>> import tempfile
      >>> workdir = tempfile.mkdtemp()
      >>> writer = MetricWriter(workdir, resume_step=0)
      >>> writer.write(100, "train", {"loss": 2.3, "accuracy": 0.4})
      >>> writer.close()
      >>> read_metrics(workdir)
      [{'step': 100, 'split': 'train', 'loss': 2.3, 'accuracy': 0.4}]
    """

    def __init__(self, workdir: str, *, resume_step: int, active: bool = True):
        self.active = active
        if not active:
            return
        self.path = os.path.join(workdir, "metrics.jsonl")
        kept = [record for record in read_metrics(workdir) if record["step"] <= resume_step]
        write_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))
        self.file = open(self.path, "a")  # noqa: SIM115  (closed by close())
        import tensorboardX

        self.tensorboard = tensorboardX.SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step + 1)

    def write(self, step: int, split: str, metrics: dict) -> None:
        if not self.active:
            return
        self.file.write(json.dumps({"step": step, "split": split, **metrics}) + "\n")
        self.file.flush()
        for name, value in metrics.items():
            self.tensorboard.add_scalar(f"{split}/{name}", value, step)
        self.tensorboard.flush()

    def close(self) -> None:
        if not self.active:
            return
        self.file.close()
        self.tensorboard.close()


def plot_curves(workdir: str, metrics: tuple[str, ...]) -> str:
    """Writes ``<workdir>/curves.png``: one panel per metric, train and validation against the step; returns its
    path."""
    from matplotlib.figure import Figure

    records = read_metrics(workdir)
    figure = Figure(figsize=(4.5 * len(metrics), 3.4))
    axes = figure.subplots(1, len(metrics), squeeze=False)
    for axis, metric in zip(axes[0], metrics, strict=True):
        for split, style in (("train", "-"), ("validation", "o-")):
            points = [(r["step"], r[metric]) for r in records if r["split"] == split and metric in r]
            if points:
                axis.plot(*zip(*points, strict=True), style, label=split, markersize=3)
        axis.set(xlabel="step", title=metric, yscale="log" if metric in ("loss", "perplexity") else "linear")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    path = os.path.join(workdir, "curves.png")
    figure.savefig(path, dpi=110)
    return path
