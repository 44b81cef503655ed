"""rfa installs as one name: a wheel built from the checkout, installed into a fresh venv outside it, adds only
``rfa*`` to site-packages, imports without its extras, and its ``rfa`` command answers ``--help`` with 0 and trains
a shipped config from a directory that holds a ``configs`` package of its own.

The fresh venv gets the wheel alone (``--no-deps``); its dependencies are read from this environment's
site-packages through a path file, which adds their directory but runs none of its path files (so not the editable
install of the checkout): every ``rfa`` module comes from the wheel.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
# the extras' modules that jax, flax and numpy do not bring (absl does come with flax)
EXTRAS = (
    "ml_collections",
    "tensorflow_datasets",
    "grain",
    "tensorboardX",
    "matplotlib",
    "tqdm",
    "sklearn",
    "statsmodels",
)


def _run(args, cwd, timeout=600):
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """``(python, bin, site-packages names before the wheel, site-packages, wheel)`` of a fresh venv with rfa's wheel
    installed."""
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"  # a copy: building in place would leave build/ and *.egg-info in the checkout
    shutil.copytree(ROOT / "rfa", source / "rfa", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheel_command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(root / "dist")]
    built = _run([*wheel_command, str(source)], root)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("rfa-*.whl")
    created = _run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], root)
    assert created.returncode == 0, created.stderr
    python = root / "venv" / "bin" / "python"
    site = pathlib.Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root).stdout.strip()
    )
    before = set(os.listdir(site))
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)], root
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, root / "venv" / "bin", before, site, wheel


def test_the_wheel_adds_only_rfa_to_site_packages(venv):
    _, bin_dir, before, site, wheel = venv
    added = set(os.listdir(site)) - before - {"dependencies.pth"}
    assert {name for name in added if not name.endswith(".dist-info")} == {"rfa"}, added
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    assert {name for name in top if not name.endswith(".dist-info")} == {"rfa"}, top
    assert (bin_dir / "rfa").exists()


def test_the_core_imports_without_the_extras(venv, tmp_path):
    python, *_ = venv
    code = textwrap.dedent(f"""
        import sys
        sys.modules.update(dict.fromkeys({EXTRAS!r}))  # None: importing any of them raises ImportError
        import jax, jax.numpy as jnp
        import rfa, rfa.nnx, rfa.linen, rfa.models
        q = jnp.ones((1, 4, 2, 8))
        W = rfa.sample_projection(jax.random.key(0), 16, 8)
        print(rfa.__file__, rfa.kernelized_attention(q, q, q, estimator="positive", projection=W).shape)
    """)
    done = _run([str(python), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    path, shape = done.stdout.split(" ", 1)
    assert path.startswith(str(python.parents[1])) and shape.strip() == "(1, 4, 2, 8)"


def test_the_command_answers_help_with_status_0(venv, tmp_path):
    """The console script, a group, a study (a command of absl flags) and the list of shipped configs, each a process
    that pays rfa's start-up. Each subcommand's --help is absl's, whose status 0 rfa.experiments.common.cli.run_main
    sees to for every command (tests/experiments/test_sweep.py); ``rfa train`` from the wheel runs in the test below,
    and a wrong subcommand's message and status are tests/experiments/test_command.py's (the same code as the
    wheel's). The command's module imports neither JAX nor NumPy: ``rfa --help`` answers, and a subcommand
    re-executes itself with huge pages, before the 3 s of JAX's import (``import rfa`` is lazy)."""
    python, bin_dir, *_ = venv
    code = "import sys, rfa.experiments.command; print(sorted({'jax', 'flax', 'numpy'} & set(sys.modules)))"
    light = _run([str(python), "-c", code], tmp_path)
    assert light.returncode == 0 and light.stdout.strip() == "[]", light.stdout + light.stderr[-2000:]
    rfa = str(bin_dir / "rfa")
    for args in (["--help"], ["benchmark", "--help"], ["study", "recall", "--help"], ["configs"]):
        done = _run([rfa, *args], tmp_path)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert done.stdout.strip(), args


def test_rfa_train_runs_a_shipped_config_beside_a_configs_package_of_the_user(venv, tmp_path, data_dir):
    """The user's own ``configs`` (with a ``sort.py`` and a ``common.py`` that must not be imported) neither
    shadows rfa's configs nor is shadowed by them."""
    _, bin_dir, *_ = venv
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "__init__.py").write_text("")
    (tmp_path / "configs" / "common.py").write_text("raise ImportError('the user rfa.configs.common was imported')\n")
    (tmp_path / "configs" / "sort.py").write_text("raise ImportError('the user configs/sort.py was imported')\n")
    args = ["train", "--config", "sort:positive,quick", "--workdir", "w", f"--config.data_dir={data_dir}"]
    done = _run([str(bin_dir / "rfa"), *args, "--config.num_train_steps=2"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "w" / "results.json").read_text())
    assert results["glibc_tunables"] == "glibc.malloc.hugetlb=1"  # the command re-executed itself with huge pages
    own = _run([str(bin_dir / "rfa"), "train", "--config", "configs/sort.py", "--workdir", "v"], tmp_path)
    assert "the user configs/sort.py was imported" in own.stderr  # a file where you stand comes first
