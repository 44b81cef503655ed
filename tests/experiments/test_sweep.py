"""Config schema, sweep expansion, variants and the workdir store of the MSE runner."""

import importlib.util
import json
import os
import re

import pytest
from helpers import run_in_turn

from rfa import workdir
from rfa.configs.common import sweep_config
from rfa.configs.sweeps import attention_output_error, derf_variance, orthogonal_vs_iid, performer_fig2
from rfa.experiments.sweep_framework import cells as sweep_cells
from rfa.experiments.sweep_framework.cells import ResultStore
from rfa.experiments.sweep_framework.config_checks import check_config


def test_cells_cover_the_sweep_once_grouped_by_projection_draws():
    config = orthogonal_vs_iid.get_config("quick")
    cells = sweep_cells.cells(config)
    points = len(config.geometry.norms) * len(config.geometry.angles)
    assert len(cells) == len(config.estimators) * len(config.projections) * len(config.num_features) * points
    assert len({cell.name for cell in cells}) == len(cells)
    groups = [cell.group for cell in cells]
    assert groups == sorted(groups, key=groups.index)  # each group is contiguous


def test_full_fig2_sweep_has_the_published_grid():
    config = performer_fig2.get_config()
    assert len(config.geometry.angles) >= 40 and len(config.geometry.norms) >= 20
    assert config.repetitions == 10_000 and config.num_features == (64,) and config.dim == 16
    assert {90.0, 120.0, 150.0, 170.0} <= set(config.geometry.angles) and {1.0, 2.0} <= set(config.geometry.norms)


def test_variants_set_fields_and_unknown_ones_are_errors():
    assert performer_fig2.get_config("quick").repetitions < performer_fig2.get_config().repetitions
    with pytest.raises(ValueError, match="unknown config variant 'quik'"):
        performer_fig2.get_config("quik")
    config = sweep_config("kernel_mse")
    with pytest.raises(ValueError, match=re.escape("unknown config field 'geometry.radius'")):
        workdir.apply_variant(config, "quick", {"quick": {"geometry.radius": 1.0}})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"estimators": ("positive", "cosine")}, "unknown estimator 'cosine'"),
        ({"estimators": ("elu",)}, "'elu' estimates no kernel"),
        ({"estimators": ()}, "config.estimators is empty"),
        ({"num_features": (0, 16)}, "config.num_features must hold integers >= 1, got 0"),
        ({"num_features": ()}, "config.num_features is empty"),
        ({"projections": ("gaussian",)}, "unknown projection kind 'gaussian'"),
        ({"repetitions": 1}, "config.repetitions must be >= 2"),
        ({"geometry.norms": ()}, "config.geometry.norms is empty"),
        ({"geometry.norms": (1.0, -1.0)}, "config.geometry.norms must hold numbers > 0"),
        ({"geometry.angles": (float("nan"),)}, "config.geometry.angles must hold finite numbers"),
        ({"name": ""}, "config.name is empty"),
        ({"estimators": ("gerf",)}, "config.feature_params.gerf must give ['A']"),
        (
            {"estimators": ("gerf",), "feature_params": {"gerf": {"A": 0.2}}},
            "config.feature_params.gerf: A must be < 1/8",
        ),
        ({"feature_params": {"gerf": {"A": -0.1}}}, "config.feature_params names ['gerf'], which config.estimators"),
        ({"modules": ("no_such_module",)}, "config.modules: cannot import 'no_such_module'"),
        ({"num_features": (16, 16)}, "config.num_features lists a value twice"),
        ({"max_relative_error": -1.0}, "config.max_relative_error must be >= 0"),
    ],
)
def test_bad_kernel_configs_name_the_field(overrides, message):
    config = workdir.apply_variant(performer_fig2.get_config("quick"), "bad", {"bad": overrides})
    with pytest.raises(ValueError, match=re.escape(message)):
        check_config(config)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"datasets": ("imagenet",)}, "config.datasets has unknown dataset 'imagenet'"),
        ({"datasets": ()}, "config.datasets is empty"),
        ({"num_features": (4,)}, "estimator_fit compares per-vector variances: num_features=(1,)"),
        ({"estimators": ("relu",)}, "'relu' needs a closed-form variance"),
        ({"num_vectors": 1}, "config.num_vectors and config.repetitions must be >= 2"),
        ({"model.num_train_steps": 0}, "config.model.num_train_steps must hold integers >= 1"),
        ({"anisotropy": 0.0}, "config.anisotropy must hold numbers > 0"),
    ],
)
def test_bad_estimator_fit_configs_name_the_field(overrides, message):
    config = workdir.apply_variant(derf_variance.get_config("quick"), "bad", {"bad": overrides})
    with pytest.raises(ValueError, match=re.escape(message)):
        check_config(config)


def test_attention_configs_need_softmax_estimators_and_scales():
    config = attention_output_error.get_config("quick")
    config.estimators = ("gaussian_trig",)
    with pytest.raises(ValueError, match="'gaussian_trig' estimates the gaussian kernel"):
        check_config(config)
    config = attention_output_error.get_config("quick")
    config.estimators = ("gerf",)
    with pytest.raises(ValueError, match=re.escape("config.feature_params.gerf must give ['A']")):
        check_config(config)
    config = attention_output_error.get_config("quick")
    config.input_scales = ()
    with pytest.raises(ValueError, match=re.escape("config.input_scales is empty")):
        check_config(config)


def _snapshot(directory):
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                files[os.path.relpath(f.name, directory)] = f.read()
    return files


def test_store_refuses_a_workdir_of_another_config_and_leaves_it_untouched(tmp_path):
    config = performer_fig2.get_config("quick")
    store = ResultStore(str(tmp_path), config)
    cell = sweep_cells.cells(config)[0]
    store.save(cell, {"mse_monte_carlo": 1.0})
    before = _snapshot(tmp_path)
    other = performer_fig2.get_config("quick")
    other.repetitions = 7
    other.geometry.norms = (1.0,)
    with pytest.raises(ValueError, match=r"different config.*geometry.norms: \[1.0, 2.0\] -> \[1.0\]; repetitions"):
        ResultStore(str(tmp_path), other)
    assert _snapshot(tmp_path) == before
    resumed = performer_fig2.get_config("quick")
    resumed.batch_elements = 1024  # an execution setting: results do not change, so resuming is allowed
    assert ResultStore(str(tmp_path), resumed).load(cell) == {**cell.labels(), "mse_monte_carlo": 1.0}


def test_write_atomic_replaces_whole_files(tmp_path):
    path = str(tmp_path / "a.json")
    workdir.write_atomic(path, json.dumps({"a": 1}))
    workdir.write_atomic(path, json.dumps({"a": 2}))
    with open(path) as f:
        assert json.load(f) == {"a": 2}
    assert os.listdir(tmp_path) == ["a.json"]


def test_write_atomic_interrupted_mid_write_leaves_the_old_file(tmp_path, monkeypatch):
    """A Ctrl-C after half the text is written: readers still see the whole old file, and no temporary."""
    path = str(tmp_path / "a.json")
    workdir.write_atomic(path, json.dumps({"a": list(range(1000))}))

    class HalfThenInterrupt:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise KeyboardInterrupt

    real_open = open
    monkeypatch.setattr(workdir, "open", lambda *a, **k: HalfThenInterrupt(real_open(*a, **k)), raising=False)
    with pytest.raises(KeyboardInterrupt):
        workdir.write_atomic(path, json.dumps({"a": list(range(2000))}))
    monkeypatch.undo()
    with open(path) as f:
        assert json.load(f) == {"a": list(range(1000))}
    assert os.listdir(tmp_path) == ["a.json"]


@pytest.mark.slow
def test_command_line_rejects_a_misspelt_override(tmp_path):
    sweep = "rfa.experiments.sweep"
    result, helped = run_in_turn(
        [[sweep, "--config=performer_fig2:quick", "--config.repetiton=5", f"--workdir={tmp_path}"], [sweep, "--help"]]
    )
    assert result.returncode != 0
    assert "repetiton" in result.stderr
    assert not os.listdir(tmp_path)
    assert helped.returncode == 0 and "--workdir" in helped.stdout  # absl's own --help exits 1


def test_shipped_configs_are_found_by_name_where_no_such_file_exists(tmp_path, monkeypatch):
    """``--config <name>[:arg]`` (and 0.2's ``configs/<name>.py``) names the installed config, in whichever group
    holds it; a file that exists where the command runs, or a name nothing ships, is passed on as it is."""
    from rfa.experiments.common.cli import SHIPPED_CONFIGS, resolve_config, resolve_config_arguments, shipped_config

    monkeypatch.chdir(tmp_path)
    sort = os.path.join(SHIPPED_CONFIGS, "tasks", "sort.py")
    assert os.path.isfile(sort) and shipped_config("sort") == shipped_config("sort.py") == sort
    assert resolve_config("sort:positive,quick") == sort + ":positive,quick"
    assert resolve_config("configs/sort.py:positive") == sort + ":positive"  # the 0.2 form, for one release
    assert resolve_config("distill:quick") == os.path.join(SHIPPED_CONFIGS, "studies", "distillation.py") + ":quick"
    assert resolve_config("performer_fig2") == os.path.join(SHIPPED_CONFIGS, "sweeps", "performer_fig2.py")
    assert resolve_config("configs/nope.py:quick") == "configs/nope.py:quick"
    assert resolve_config("../sort:x") == "../sort:x"
    (tmp_path / "performer_fig2").mkdir()  # a folder of that name (a workdir, say) is not a config file
    assert resolve_config("performer_fig2") == shipped_config("performer_fig2")
    (tmp_path / "sort").write_text("")
    assert resolve_config("sort:x") == "sort:x"  # the user's own file wins
    assert resolve_config_arguments(["prog", "--config", "fig.py", "--config=performer_fig2:quick"]) == [
        "prog",
        "--config",
        "fig.py",
        "--config=" + shipped_config("performer_fig2") + ":quick",
    ]


def test_a_reproduction_module_loaded_twice_registers_once_and_another_of_its_name_is_refused(tmp_path, monkeypatch):
    """``rfa sweep --config my_reproduction.py`` runs the module as a config file, then its report imports it by
    name: the same definition twice. The how-to's sweep failed there with "already registered"."""
    from rfa.experiments.sweep_framework import registry

    monkeypatch.setattr(registry, "_REPRODUCTIONS", dict(registry._REPRODUCTIONS))
    module = tmp_path / "twice_loaded.py"
    module.write_text(
        "from rfa.experiments.sweeps import Reproduction, register_reproduction\n"
        "def analyze(config, records, workdir):\n"
        "    return records  # never called: the test registers, it does not sweep\n"
        "register_reproduction(Reproduction('twice_loaded', 'kernel_mse', analyze, config='twice_loaded'))\n"
    )
    monkeypatch.chdir(tmp_path)
    loaded = []
    for name, path in (("twice_loaded", str(module)), ("config_file_twice_loaded", module.name)):  # as the command
        spec = importlib.util.spec_from_file_location(name, path)
        loaded.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(loaded[-1])
    assert registry.reproduction("twice_loaded").analyze is loaded[-1].analyze
    other = registry.Reproduction("twice_loaded", "kernel_mse", lambda config, records, workdir: None)
    with pytest.raises(ValueError, match="a reproduction named 'twice_loaded' is already registered"):
        registry.register_reproduction(other)
