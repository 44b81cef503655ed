"""The shape of the code: small modules, no private name shared across modules, no import cycle, kinds in registries.

Read from the source (AST), so a violation fails here before a reviewer has to find it.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("rfa", "experiments", "configs")  # rfa, and the 0.2 names a checkout keeps for one release
SOURCES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
# tools/ (its scripts and the package mutants/) keeps to the size and kind rules. The import rules follow imports of
# PACKAGES, and tools is none: mutants/ imports its own modules relatively and is loaded by its path.
TOOLS = sorted((ROOT / "tools").rglob("*.py"))
MAX_LINES = 400


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SOURCES}


def imports(path: pathlib.Path) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` of every import of a project module in ``path`` (module level and inside
    functions alike): ``names`` are the names taken from it (empty for ``import x``). An import by a string,
    ``importlib.import_module("a.b")`` or ``__import__("a.b")`` with a literal name, counts as ``import a.b``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            name = node.args[0].value
            if function in ("import_module", "__import__") and isinstance(name, str) and name.split(".")[0] in PACKAGES:
                found.append((name, [], node.lineno))
    return found


def test_every_module_is_at_most_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES + TOOLS if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_no_private_name_is_imported_across_modules():
    private = []
    for path in SOURCES:
        for module, names, line in imports(path):
            taken = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if taken:
                private.append(f"{path.relative_to(ROOT)}:{line} takes {taken} from {module}")
    assert not private, "\n".join(private)


def test_no_private_attribute_of_another_project_module_is_read():
    """``module._name`` where ``module`` is a project module imported by this file."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                aliases |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in MODULES}
            elif isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name in MODULES}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for module, names, _ in imports(path):
            submodules = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
            targets |= submodules or ({module} if module in MODULES else set())
        graph[name] = targets - {name}
    return graph


def test_there_is_no_import_cycle():
    graph, state, cycles = _graph(), {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(" -> ".join([*stack[stack.index(target) :], target]))
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(cycles)


OUTSIDE_CORE = ("rfa.experiments", "rfa.configs")  # installed with rfa, imported only with rfa[experiments]


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_layers_point_one_way():
    """random_features <- attention <- layers <- models <- tasks <- train <- experiments; rfa's core never imports
    rfa.experiments or rfa.configs, and a config imports only rfa.configs.common (and the core, for the commons)."""
    order = ["rfa.random_features", "rfa.attention", "rfa.layers", "rfa.models", "rfa.tasks", "rfa.train"]
    upward = []
    for name, targets in _graph().items():
        for target in targets:
            if _in(name, "rfa") and not _in(name, *OUTSIDE_CORE) and _in(target, *OUTSIDE_CORE, *PACKAGES[1:]):
                upward.append(f"{name} -> {target} (the core imports no experiment and no config)")
            if _in(name, "rfa.configs") and _in(target, "rfa.experiments", *PACKAGES[1:]):
                upward.append(f"{name} -> {target} (configs import only rfa.configs.common and the core)")
            if (
                _in(name, "rfa.configs")
                and name.count(".") == 3
                and _in(target, "rfa.configs")
                and target != "rfa.configs.common"
            ):
                upward.append(f"{name} -> {target} (configs import only rfa.configs.common and the core)")
            rank = {layer: i for i, layer in enumerate(order)}
            mine = next((rank[layer] for layer in order if name.startswith(layer)), None)
            theirs = next((rank[layer] for layer in order if target.startswith(layer)), None)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{name} -> {target}")
    assert not upward, "\n".join(upward)


def _third_party_imports(path: pathlib.Path) -> set[str]:
    """The top-level names of the packages ``path`` imports (at module level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
    return found


def test_the_attention_primitives_are_pure_functions():
    """``rfa/attention`` imports no flax: whatever holds Flax state lives in ``rfa/layers`` or above."""
    flax = [
        str(p.relative_to(ROOT))
        for p in SOURCES
        if _in(module_name(p), "rfa.attention") and "flax" in _third_party_imports(p)
    ]
    assert not flax, f"these modules of rfa.attention import flax: {flax}"


def test_a_package_answers_for_moved_names_only_with_modules_that_define_them():
    """A moved name (``rfa._validation.moved_names``: the one way a package names a module above it, for one release)
    resolves to a module that defines it, and the package does not also define it."""
    import importlib
    import warnings

    for path in SOURCES:
        if path.name != "__init__.py" or "moved_names(" not in path.read_text():
            continue
        package = importlib.import_module(module_name(path))
        for name, target in package.__getattr__.moves.items():
            assert name not in vars(package), f"{package.__name__}.{name} is defined and moved"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert getattr(package, name) is getattr(importlib.import_module(target), name)
            assert caught and issubclass(caught[0].category, DeprecationWarning)


FAMILIES = ("rfa.experiments.sweeps", "rfa.experiments.benchmarks", "rfa.experiments.studies")
SHARED = ("rfa.experiments.common", "rfa.experiments.sweep_framework")  # what the commands and the families share


def test_no_experiment_family_reaches_into_another():
    """A family (sweeps, benchmarks, studies) imports another only through that family's package, which is its public
    face (``rfa.experiments.sweeps``: ``run`` and the shipped sweeps), never a module inside it; the shared helpers
    (:data:`SHARED`) import no family and no command. What two families share lives in ``rfa.experiments.common``."""
    found = []
    for name, targets in _graph().items():
        mine = next((family for family in FAMILIES if _in(name, family)), None)
        for target in targets:
            theirs = next((family for family in FAMILIES if _in(target, family)), None)
            if mine and theirs and theirs != mine and target != theirs:
                found.append(f"{name} -> {target} (import {theirs} itself, or move what both use to common)")
            if _in(name, *SHARED) and _in(target, "rfa.experiments") and not _in(target, *SHARED):
                found.append(f"{name} -> {target} (the shared helpers import no family and no command)")
    assert not found, "\n".join(found)


# A branch on a task kind or an experiment kind by name: ``kind == "lm"``, ``task.kind in ("seq2seq", ...)``,
# ``config.experiment == "kernel_mse"``. Kinds are asked of their registry entries instead.
TASK_KINDS = ("seq2seq", "lm", "classification", "image_classification", "forecast")
EXPERIMENT_KINDS = ("kernel_mse", "attention_error", "estimator_fit")
BRANCH = re.compile(r"(\.kind|\bkind|\.experiment)\s*(==|!=|\bin\b|\bnot in\b)\s*[\(\[\{]?\s*[\"']([a-z_]+)[\"']")


@pytest.mark.parametrize("path", SOURCES + TOOLS, ids=[str(p.relative_to(ROOT)) for p in SOURCES + TOOLS])
def test_no_string_branch_on_a_task_or_experiment_kind(path):
    branches = [
        f"line {i}: {line.strip()}"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        for match in BRANCH.finditer(line)
        if match.group(3) in TASK_KINDS + EXPERIMENT_KINDS
    ]
    assert not branches, "\n".join(branches)


EXTRAS = (
    "tensorflow_datasets",
    "grain",
    "array_record",
    "ml_collections",
    "matplotlib",
    "sklearn",
    "statsmodels",
    "tensorboardX",
    "tqdm",
)
CORE = """
import sys
for name in {extras}:
    sys.modules[name] = None  # an import of it fails: as if only the core (jax, flax, numpy) were installed
import jax, jax.numpy as jnp
from flax import nnx
import rfa, rfa.models
W = rfa.sample_projection(jax.random.key(0), 16, 8)
q = jnp.ones((1, 6, 2, 8)) * 0.1
out = rfa.kernelized_attention(q, q, q, estimator="oprf", projection=W, is_causal=True,
                               feature_params=rfa.estimator("oprf").standard_params(8))
mse = rfa.theory.mse("positive", jnp.ones(8) * 0.1, jnp.ones(8) * 0.2, 16)
fn = rfa.make_attention_fn("positive", 16, head_dim=4, key=jax.random.key(1))
y = nnx.MultiHeadAttention(2, 8, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))(jnp.ones((1, 5, 8)))
model = rfa.models.Decoder(rfa.models.preset("tiny", vocab_size=20), rngs=nnx.Rngs(0))
print(out.shape, y.shape, model(jnp.ones((1, 4), jnp.int32)).shape, float(mse) > 0)
"""


@pytest.mark.slow  # a subprocess importing every core module (7 s)
def test_the_core_runs_with_jax_flax_and_numpy_only():
    """Primitives, estimators, theory, the Flax adapter and the models import none of the extras."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CORE.format(extras=EXTRAS)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(1,", "6,", "2,", "8)", "(1,", "5,", "8)", "(1,", "4,", "20)", "True"]


def test_every_shipped_task_has_a_config():
    """Each registered task is trained (one of a config's variants: ``quick`` for the samples) or evaluated by some
    shipped config."""
    import importlib

    from rfa.tasks import SHIPPED

    named = set()
    for path in sorted((ROOT / "rfa" / "configs").glob("*/*.py")):
        module = importlib.import_module(module_name(path))
        for arg in ("exact", "exact,quick"):
            try:
                named.add(module.get_config(arg).task)
            except (AttributeError, ValueError, TypeError):  # a sweep or a study config: no task, or no such arg
                continue
        if hasattr(module, "get_config"):
            named.add(module.get_config().get("longer_task"))  # a study's evaluation-only task
    assert set(SHIPPED) <= named, f"no config trains {sorted(set(SHIPPED) - named)}"


def test_one_class_per_name():
    """No two classes of the library share a name, but a layer in both of Flax's APIs (``rfa.nnx.DeltaNet`` and
    ``rfa.linen.DeltaNet``), as Flax names its own."""
    defined = {}
    for path in sorted((ROOT / "rfa").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    twins = (
        {"rfa/layers/linen_attention.py", "rfa/layers/nnx_attention.py"},
        {"rfa/layers/linen_state_layers.py", "rfa/layers/state_layers.py"},
    )
    shared = {name: paths for name, paths in defined.items() if len(paths) > 1 and set(paths) not in twins}
    assert not shared, f"classes of the same name: {shared}"


def test_the_flax_namespaces_export_their_layers_and_helpers_only():
    """``from rfa.nnx import *`` and ``dir(rfa.nnx)`` (and rfa.linen's) give the layers and their helpers, not the
    modules' imports."""
    import rfa.linen
    import rfa.nnx

    exported = {module.__name__: set(module.__all__) for module in (rfa.nnx, rfa.linen)}
    layers = {"DeltaNet", "GatedDeltaNet", "KimiDeltaAttention", "GatedLinearAttention", "SlidingWindowAttention"}
    fla = {"load_fla_state_dict", "from_fla_config", "from_fla_layer", "cache_from_fla", "cache_to_fla"}
    assert exported["rfa.nnx"] == layers | {"MultiHeadAttention", "redraw", "save", "restore"} | fla
    assert exported["rfa.linen"] == layers | {"MultiHeadDotProductAttention", "RANDOM_FEATURES"}
    for module in (rfa.nnx, rfa.linen):
        namespace = {}
        exec(f"from {module.__name__} import *", namespace)
        assert set(namespace) - {"__builtins__"} == exported[module.__name__]
        assert dir(module) == sorted(exported[module.__name__])  # tab completion offers no jnp or functools
