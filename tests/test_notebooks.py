"""Every notebook in notebooks/ executes top to bottom without an error, and checks what it shows.

Each ``notebooks/*.ipynb`` (found by glob, so new notebooks are picked up automatically) runs in a
fresh ``python3`` kernel with ``notebooks/`` as its working directory; a cell that raises fails the
test with nbclient's ``CellExecutionError``, which shows the cell and its traceback. The executed
notebook is kept in memory only: the stored file (without outputs) is never rewritten. Notebooks
that run experiments write them under ``$RFA_WORKDIR``, a temporary directory here. A notebook
states its findings as ``assert`` statements next to the numbers and figures it shows, so a
notebook that runs but shows something wrong fails too; one without assertions fails here.

``$RFA_NOTEBOOK_QUICK`` is set too: a notebook whose default run trains for long reads it to run the same cells on
a shorter run (vision_attention.ipynb: 100 steps of 32 images without dropout, not 200 steps of 64 with it), and
its assertions hold there as well; what it shows a reader, without the variable, is unchanged.
"""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # executes whole documents; the fast tier leaves them out

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("RFA_WORKDIR", str(tmp_path))  # where notebooks write experiment results (kernel inherits it)
    monkeypatch.setenv("RFA_NOTEBOOK_QUICK", "1")  # the smaller runs of the notebooks that have one
    notebook = nbformat.read(path, as_version=4)
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    assert sum(len(re.findall(r"^\s*assert ", source, re.M)) for source in code) >= 3, f"{path.name} asserts nothing"
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
        shutdown_kernel="immediate",  # the cells have run: a graceful shutdown waited a second or more for the kernel
    )
    client.execute()  # raises CellExecutionError on the first cell that raises
