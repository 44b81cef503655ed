"""The documentation site builds with no warning (Sphinx -W, as ``make docs``), and its API reference documents
the public names from their docstrings, each once, in the module that defines it."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Key names of each API page: the HTML anchor autodoc gives a documented object is its full dotted path.
DOCUMENTED = {
    "attention": [
        "rfa.attention.kernelized.api.kernelized_attention",
        "rfa.attention.kernelized.api.sequence_parallel_attention",
        "rfa.attention.flax_adapter.make_attention_fn",
        "rfa.attention.fourier_integral.fourier_integral_attention",
        "rfa.attention.kernelized.relative.toeplitz_sums",
    ],
    "random_features": ["rfa.random_features.feature_maps.Estimator", "rfa.random_features.feature_maps.Param"],
    "tasks": ["rfa.tasks.base.TaskKind", "rfa.tasks.base.register_task_kind", "rfa.tasks.base.Task"],
    "models": ["rfa.models.config.EncoderConfig", "rfa.models.attention.AttentionInputs"],
    "data": ["rfa.data.pipeline.batches"],
    "train": ["rfa.train.loop.train_and_evaluate"],
    "experiments": [
        "rfa.experiments.sweeps.registry.Reproduction",
        "rfa.experiments.sweeps.registry.register_reproduction",
    ],
    "rfa": ["rfa.nnx.MultiHeadAttention", "rfa.linen.MultiHeadDotProductAttention", "rfa.checks.raise_if"],
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
    layer = " ".join(re.sub(r"<[^>]+>", "", api["rfa"].split('id="rfa.nnx.MultiHeadAttention"')[1][:3000]).split())
    assert "MultiHeadAttention(num_heads, in_features, qkv_features=None" in layer
    assert "estimator='positive', num_features=256" in layer
    for page in ("index", "tour", "changelog", "references", "howto/estimator", "results/benchmarks"):
        assert (tmp_path / f"{page}.html").exists(), page
    raw = []  # a directive that a parser left as text (MyST reading reStructuredText): it shows on the page
    for path in sorted(tmp_path.rglob("*.html")):
        text = re.sub(r"<[^>]+>", " ", path.read_text())
        raw += [f"{path.relative_to(tmp_path)}: {m}" for m in re.findall(r"\.\. [a-z-]+::|```\{[a-z-]+\}", text)]
    assert not raw, f"directives rendered as text: {raw}"


@pytest.mark.slow
@pytest.mark.parametrize("page", ["flax.md", "projection.md"])
def test_the_howto_runs_top_to_bottom(page):
    """Every python block of the how-to, in order, in one namespace (its asserts included)."""
    text = (ROOT / "docs" / "howto" / page).read_text()
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    assert len(blocks) >= 3
    namespace = {}
    for block in blocks:
        exec(compile(block, f"docs/howto/{page}", "exec"), namespace)
