"""The documentation site builds with no warning (Sphinx -W, as ``make docs``), and its API reference documents
the public names from their docstrings, each once, in the module that defines it."""

import ast
import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest
from helpers import own_estimators

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Key names of each API page: the HTML anchor autodoc gives a documented object is its full dotted path.
DOCUMENTED = {
    "attention": [
        "rfa.attention.kernelized.api.kernelized_attention",
        "rfa.attention.kernelized.api.sequence_parallel_attention",
        "rfa.attention.fourier_integral.fourier_integral_attention",
        "rfa.attention.kernelized.relative.toeplitz_sums",
    ],
    "random_features": ["rfa.random_features.feature_maps.Estimator", "rfa.random_features.feature_maps.Param"],
    "tasks": ["rfa.tasks.base.TaskKind", "rfa.tasks.base.register_task_kind", "rfa.tasks.base.Task"],
    "models": ["rfa.models.config.EncoderConfig", "rfa.models.site.Site"],
    "layers": [
        "rfa.layers.attention_fn.make_attention_fn",
        "rfa.layers.multi_head.AttentionInputs",
        "rfa.layers.kinds.AttentionKind",
        "rfa.layers.kinds.register_attention_kind",
        "rfa.layers.nnx_attention.MultiHeadAttention",
        "rfa.layers.linen_attention.MultiHeadDotProductAttention",
    ],
    "data": ["rfa.data.pipeline.batches"],
    "train": ["rfa.train.loop.train_and_evaluate"],
    "experiments": [
        "rfa.experiments.sweep_framework.registry.Reproduction",
        "rfa.experiments.sweep_framework.registry.register_reproduction",
    ],
    "rfa": ["rfa.checks.raise_if"],
}


@pytest.mark.slow
def test_the_site_builds_without_warnings_and_documents_the_api(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, f"sphinx failed (warnings are errors):\n{build.stderr[-6000:]}"
    api = {page: (tmp_path / "api" / f"{page}.html").read_text() for page in DOCUMENTED}
    missing = [
        f"{page}: {name}" for page, names in DOCUMENTED.items() for name in names if f'id="{name}"' not in api[page]
    ]
    assert not missing, f"not documented on their API pages: {missing}"
    for name in ("rfa.kernelized_attention", "rfa.Estimator", "rfa.Param", "rfa.FeatureMap"):  # the top-level names
        assert f'<span class="pre">{name}</span>' in api["rfa"], name
    assert "rfa benchmark attention" in api["experiments"]  # commands, read without importing
    for page, html in api.items():  # no reStructuredText markup left as text (help texts are shown as written)
        text = re.sub(r"<[^>]+>", "", html)
        assert not re.search(r"``|:(mod|func|class|data|meth):`", text), f"{page}: raw markup in the rendered text"
        assert "(*args, **kwargs)" not in text, f"{page}: a class shown without its constructor's signature"
        assert not re.search(r"\w+ \(\w+,\)", text), f"{page}: arguments grouped on one line render as a type"
    layer = " ".join(
        re.sub(
            r"<[^>]+>", "", api["layers"].split('id="rfa.layers.nnx_attention.MultiHeadAttention"')[1][:3000]
        ).split()
    )
    assert "MultiHeadAttention(num_heads, in_features, qkv_features=None" in layer
    assert "estimator='positive', num_features=256" in layer
    for page in ("index", "tour", "changelog", "references", "howto/estimator", "results/benchmarks"):
        assert (tmp_path / f"{page}.html").exists(), page
    raw = []  # a directive that a parser left as text (MyST reading reStructuredText): it shows on the page
    for path in sorted(tmp_path.rglob("*.html")):
        text = re.sub(r"<[^>]+>", " ", path.read_text())
        raw += [f"{path.relative_to(tmp_path)}: {m}" for m in re.findall(r"\.\. [a-z-]+::|```\{[a-z-]+\}", text)]
    assert not raw, f"directives rendered as text: {raw}"


FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HOWTOS = sorted(path.name for path in (ROOT / "docs" / "howto").glob("*.md"))
ELSEWHERE = ("gcloud ", "srun ", "imdb_reviews")  # blocks for a TPU slice, a SLURM cluster, a dataset to download
QUICK = re.compile(r"(--config[ =])([\w./]+)(?::([\w,]+))?")  # a config and its variant


def _quick(commands: str) -> str:
    """The commands with every config at its ``quick`` scale (seconds), as the pages offer it: ``sort:positive``
    runs as ``sort:positive,quick``, ``compare_kernels`` as ``compare_kernels:quick``."""

    def quick(match):
        variant = match[3] or ""
        return (
            match[0] if "quick" in variant.split(",") else f"{match[1]}{match[2]}:{variant + ',' * bool(variant)}quick"
        )

    return QUICK.sub(quick, commands)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _commands(blocks: list[tuple[str, str]], directory: pathlib.Path) -> str:
    """A how-to's bash blocks as one script, run as a reader would in ``directory``: each config at its quick scale,
    what the page puts in ``/tmp`` in the directory, a coordinator on a free port (blocks for a cluster or a dataset
    to download are left out)."""
    commands = "".join(text for kind, text in blocks if kind == "bash" and not any(w in text for w in ELSEWHERE))
    commands = _quick(commands).replace("/tmp/", f"{directory}/")
    return re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{_free_port()}", commands)


@pytest.mark.slow
@pytest.mark.parametrize("page", [f"howto/{name}" for name in HOWTOS] + ["models.md"])
def test_a_page_runs_as_written(page, tmp_path, monkeypatch, data_dir):
    """A reader's run of a page in an empty directory. A python block that opens with ``# NAME.py`` is a file saved
    there; the other python blocks run in order in one namespace, or, where a command runs ``python NAME.py`` with no
    such file, are that script. Then a how-to's commands run (:func:`_commands`), with the suite's XLA flags beside
    the page's; a ``text`` block is what they print or write in a ``report.md``."""
    blocks = FENCE.findall((ROOT / "docs" / page).read_text())
    commands = _commands(blocks, tmp_path) if page.startswith("howto/") else ""
    python = [text for kind, text in blocks if kind == "python"]
    files = {match[1]: text for text in python if (match := re.match(r"# (\w+\.py)\n", text))}
    examples = [text for text in python if text not in files.values()]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)  # another page's module of that name
    (tmp_path / "data").symlink_to(data_dir)  # the commands' data_dir, "data": datasets prepared once a session
    script = re.search(r"^(?:\S+=\S+ )*python (\w+\.py)", commands, re.MULTILINE)
    if script and script[1] not in files:
        (tmp_path / script[1]).write_text("".join(examples))
    else:
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
        namespace = {}
        with own_estimators():
            for text in examples:
                exec(compile(text, f"docs/{page}", "exec"), namespace)
    assert examples or commands, f"{page}: nothing to run"
    if commands:
        run = subprocess.run(
            ["bash", "-e", "-x", "-c", re.sub(r"XLA_FLAGS=(\S+)", r'XLA_FLAGS="\1 $XLA_FLAGS"', commands)],
            cwd=tmp_path,
            env={  # rfa and python import this checkout's rfa (tools/mutants runs the tests on a mutated copy)
                **os.environ,
                "PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}",
                "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            },
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert run.returncode == 0, f"{page}: a command failed:\n{run.stderr[-6000:]}"
        written = run.stdout + "".join(path.read_text() for path in tmp_path.rglob("report.md"))
        for kind, text in blocks:
            assert kind != "text" or text.strip() in written, f"{page}: nothing printed or wrote {text!r}"
    if page in WRITES:
        WRITES[page](tmp_path)


def _compare_kernels_wrote_every_pair(directory: pathlib.Path) -> None:
    """training.md's ``rfa study compare_kernels`` (quick: exact and positive features on sort, 2 seeds each): the
    table, the JSON of each pair's seeds (their mean), each run's workdir and the figure."""
    workdir = directory / "workdir" / "train"
    rows = (workdir / "compare_kernels.md").read_text().splitlines()
    assert [row.split(" | ")[:4] for row in rows[2:]] == [
        ["| sort", "exact", "-", "2"],
        ["| sort", "positive", "8", "2"],  # the quick variant's num_features_of, in place of the config's 16
    ]
    results = json.loads((workdir / "compare_kernels.json").read_text())
    assert [(r["attention"], r["seeds"]) for r in results] == [("exact", [0, 1]), ("positive", [0, 1])]
    losses = [run["test"]["loss"] for run in results[1]["runs"]]
    assert losses[0] != losses[1]  # the seeds are different runs
    accuracies = [run["test"]["accuracy"] for run in results[1]["runs"]]
    assert results[1]["test"]["accuracy"]["mean"] == pytest.approx(sum(accuracies) / len(accuracies))
    assert (workdir / "sort" / "positive" / "seed_1" / "results.json").exists()
    assert (workdir / "compare_kernels.png").stat().st_size > 10_000


WRITES = {"howto/training.md": _compare_kernels_wrote_every_pair}
"""What a page's commands write, checked after it runs (where no other test runs the command)."""


# ``rfa.<sub>.<name>`` as the pages show it. rfa.experiments and rfa.configs are named in prose by module path (a
# command, a config); a user imports from them, so their prose mentions are not attribute paths.
REFERENCE = re.compile(r"(?<![\w.])rfa(?:\.\w+)+")
INLINE = re.compile(r"`([^`\n]+)`")
NAMED_BY_PATH = ("experiments", "configs")
# The lazily imported subpackages in the order their imports point (rfa.tasks imports rfa.data and rfa.models, rfa.train
# all three), so that checking one never imports a later one: a name is found only if a plain import reaches it.
LAZY_ORDER = ("models", "data", "tasks", "train")


def _code_references(code: str) -> set[str]:
    """The attribute chains ``rfa.a.b...`` (two names at least) a Python block uses, less those under a subpackage
    the block imports itself (``import rfa.train``, ``from rfa.train import ...``, ``from rfa import train``)."""
    tree = ast.parse(code)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[1] for a in node.names if a.name.startswith("rfa.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rfa":
            parts = node.module.split(".")
            imported |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
    chains = set()
    for node in ast.walk(tree):
        names = []
        while isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id == "rfa" and len(names) >= 2 and names[-1] not in imported:
            chains.add(".".join(["rfa", *reversed(names)]))
    return {chain for chain in chains if not any(other.startswith(chain + ".") for other in chains)}


def _page_references() -> dict[str, set[str]]:
    """``{"code" | "prose": {(page, reference)}}`` over the pages (the changelog's old names left out) and README."""
    found = {"code": set(), "prose": set()}
    for path in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]):
        if path.name == "changelog.md":
            continue
        text, page = path.read_text(), str(path.relative_to(ROOT))
        for language, code in FENCE.findall(text):
            if language == "python":
                found["code"] |= {(page, reference) for reference in _code_references(code)}
        for span in INLINE.findall(FENCE.sub("", text)):
            found["prose"] |= {
                (page, reference)
                for reference in REFERENCE.findall(span)
                if reference.count(".") >= 2 and reference.split(".")[1] not in NAMED_BY_PATH
            }
    return found


RESOLVE = """
import functools, importlib, json, sys, types
import rfa
references = json.loads(sys.argv[1])
order = ["", *json.loads(sys.argv[2])]
rank = lambda reference: order.index(reference.split(".")[1]) if reference.split(".")[1] in order else 0
unreached = []
for reference in sorted(sorted({r for _, r in references}), key=rank):  # the core, then each lazy subpackage
    try:
        functools.reduce(getattr, reference.split(".")[1:], rfa)
    except AttributeError:
        unreached.append(reference)
kinds = {}
for reference in unreached:  # now imported by name: a module (named in prose) or a name (it must be reachable)
    parts, kinds[reference] = reference.split("."), "missing"
    for n in range(len(parts), 1, -1):
        try:
            found = importlib.import_module(".".join(parts[:n]))
            found = functools.reduce(getattr, parts[n:], found)
        except (ImportError, AttributeError):
            continue
        kinds[reference] = "module" if isinstance(found, types.ModuleType) else "name"
        break
print(json.dumps(kinds))
"""


@pytest.mark.slow  # a subprocess that imports rfa and its subpackages (about 5 s)
def test_every_rfa_name_the_pages_show_is_reached_from_a_plain_import_rfa():
    """What a page's code writes as ``rfa.<sub>.<name>`` works after ``import rfa`` alone, or its block imports the
    subpackage; a name the prose shows (``rfa.train.weight_decay_mask``) works after ``import rfa`` as well, where a
    module it names by its path need not be an attribute. Checked in a fresh process: this one has imported
    everything."""
    found = _page_references()
    assert ("docs/howto/flax.md", "rfa.train.weight_decay_mask") in found["prose"]  # the case that failed
    everything = sorted(found["code"] | found["prose"])
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE, json.dumps(everything), json.dumps(LAZY_ORDER)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kinds = json.loads(done.stdout.splitlines()[-1])
    failed = [f"{page}: {ref} (in code)" for page, ref in sorted(found["code"]) if ref in kinds]
    failed += [
        f"{page}: {ref} ({kinds[ref]})" for page, ref in sorted(found["prose"]) if kinds.get(ref, "module") != "module"
    ]
    assert not failed, "not reached from `import rfa` (make it an attribute, or show the import):\n" + "\n".join(failed)
