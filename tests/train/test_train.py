"""Training: schedules, steps and metrics, the loop end to end, interrupt and resume, bad configs."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import grain
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx
from helpers import lines, non_progress_lines, run_in_turn

from rfa.configs.tasks import digits_swin, listops, pathfinder_vit, python_source, sort
from rfa.tasks import eval_batches, get_task
from rfa.train import (
    CheckpointError,
    TrainingInterrupted,
    build_model,
    check_config,
    evaluate_model,
    load_model,
    make_schedule,
    metric_sums,
    model_config,
    read_metrics,
    shift_right,
    summarize,
    task_config,
    train_and_evaluate,
)
from rfa.train.checkpoint import Checkpoints
from rfa.workdir import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMING = ("step_time_s", "tokens_per_s")


def _quick(module, attention="positive", data_dir=None, **overrides):
    config = module.get_config(f"{attention},quick")
    config.data_dir = data_dir
    for field, value in overrides.items():
        *parents, leaf = field.split("__")
        node = config
        for parent in parents:
            node = node[parent]
        node[leaf] = value
    return config


def _deterministic(records):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def test_schedules_follow_their_formulas():
    config = task_config("sort", "exact").optimizer
    cosine = jax.jit(make_schedule(config, num_steps=1000, d_model=64))
    assert float(cosine(0)) == 0 and float(cosine(100)) == pytest.approx(1e-3)
    assert float(cosine(1000)) == pytest.approx(1e-4) and float(cosine(50)) == pytest.approx(5e-4)
    config.schedule, config.learning_rate, config.warmup_steps = "inverse_sqrt", 1.0, 400
    paper = jax.jit(make_schedule(config, num_steps=1000, d_model=512))
    for step in (1, 200, 400, 4000):
        assert float(paper(step)) == pytest.approx(512**-0.5 * min(step**-0.5, step * 400**-1.5), rel=1e-5)


def test_shift_right_starts_with_bos_and_keeps_padding():
    np.testing.assert_array_equal(shift_right(jnp.array([[5, 6, 2, 0]])), [[1, 5, 6, 2]])


@pytest.mark.slow
def test_metric_sums_match_numpy_for_a_classifier(data_dir):
    config = _quick(listops, data_dir=data_dir)
    model = build_model(config, get_task("listops"))
    model.eval()
    rng = np.random.default_rng(0)
    batch = {
        "inputs": rng.integers(3, 18, (4, 24)).astype(np.int32),
        "label": np.array([0, 3, 9, 1], np.int32),
        "weight": np.array([1, 1, 1, 0], np.float32),
    }
    sums = jax.jit(lambda b: metric_sums(model, b, kind="classification"))(batch)
    logits = np.asarray(model(jnp.asarray(batch["inputs"])), np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -log_p[np.arange(4), batch["label"]]
    assert float(sums["nll"]) == pytest.approx((nll * batch["weight"]).sum(), rel=1e-5)
    correct = (logits.argmax(-1) == batch["label"]) * batch["weight"]
    assert float(sums["correct"]) == correct.sum() and float(sums["weight"]) == 3
    assert summarize(sums, kind="classification")["accuracy"] == pytest.approx(correct.sum() / 3)


@pytest.fixture(scope="module")
def sort_run(data_dir, tmp_path_factory):
    """``(config, workdir, results)`` of one quick sort run with positive features, shared by the module."""
    config, workdir = _quick(sort, "positive", data_dir), str(tmp_path_factory.mktemp("sort_run"))
    return config, workdir, train_and_evaluate(config, workdir, progress=False)


def _check_run(results: dict, workdir: str) -> None:
    records = read_metrics(workdir)
    assert [r["step"] for r in records if r["split"] == "train"] == [4, 8, 12]
    assert [r["step"] for r in records if r["split"] == "validation"] == [12]  # test is not in the metrics
    assert results["validation"] == records[-1] and results["test"]["step"] == 12 and results["seed"] == 0
    assert results["step_time_s"] > 0 and results["step_memory_bytes"] > 0 and results["parameters"] > 1000
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["12", "8"]  # the two newest are kept
    assert os.path.getsize(os.path.join(workdir, "curves.png")) > 10_000
    (event_file,) = os.listdir(os.path.join(workdir, "tensorboard"))
    with open(os.path.join(workdir, "tensorboard", event_file), "rb") as f:
        assert b"train/loss" in f.read()


@pytest.mark.slow
def test_validation_is_evaluated_while_training_and_test_once_on_the_final_checkpoint(sort_run):
    config, workdir, results = sort_run
    model, _, task, step = load_model(workdir)
    assert step == config.num_train_steps

    def token_accuracy(split):  # teacher-forced: argmax of the logits against the targets, padding left out
        correct = total = 0.0
        sizes = {"batch_size": config.batch_size, "max_length": config.max_length, "max_batches": config.eval_batches}
        for batch in eval_batches(task, data_dir=config.data_dir, split=split, **sizes):
            logits = model(jnp.asarray(batch["inputs"]), shift_right(jnp.asarray(batch["targets"])))
            kept = batch["targets"] != 0
            correct += float(((np.asarray(logits).argmax(-1) == batch["targets"]) & kept).sum())
            total += float(kept.sum())
        return correct / total

    assert results["test"]["accuracy"] == pytest.approx(token_accuracy("test"), rel=1e-5)
    assert results["validation"]["accuracy"] == pytest.approx(token_accuracy("validation"), rel=1e-5)
    first = {
        split: next(iter(eval_batches(task, data_dir=config.data_dir, batch_size=4, max_length=8, split=split)))
        for split in ("validation", "test")
    }
    assert not np.array_equal(first["validation"]["inputs"], first["test"]["inputs"])  # two different splits


@pytest.mark.slow
def test_a_trained_model_is_rebuilt_for_longer_sequences_and_evaluated_on_them(sort_run, tmp_path):
    config, workdir, results = sort_run
    model, _, _, _ = load_model(workdir)
    longer, longer_config, _, _ = load_model(workdir, max_length=72)
    assert longer_config.max_length == 72 and longer.config.max_length == 72
    rng = np.random.default_rng(0)
    source, target = (jnp.asarray(rng.integers(3, 20, (2, config.max_length))) for _ in range(2))
    np.testing.assert_allclose(longer(source, target), model(source, target), atol=1e-5)  # same weights, positions
    assert evaluate_model(model, config)["accuracy"] == pytest.approx(results["test"]["accuracy"], rel=1e-5)
    longer_config.task = "sort_longer"
    metrics = evaluate_model(longer, longer_config, "validation")
    assert 0 <= metrics["sequence_accuracy"] <= metrics["accuracy"] <= 1 and metrics["loss"] > 0
    learned = _quick(sort, "exact", config.data_dir, model__positional="learned", num_train_steps=4, eval_every=4)
    train_and_evaluate(learned, str(tmp_path), progress=False)
    with pytest.raises(ConfigError, match=r"shape \(24, 32\) for max_length = 24 .*cannot change its length"):
        load_model(str(tmp_path), max_length=72)


@pytest.mark.slow
def test_a_seq2seq_run_trains_logs_checkpoints_and_plots(sort_run):
    _, workdir, results = sort_run
    _check_run(results, workdir)
    assert results["kind"] == "seq2seq" and 0 <= results["test"]["sequence_accuracy"] <= 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "attention"),
    [
        (listops, "exact"),
        (python_source, "oprf"),  # a map fitted to the data
        (sort, "gated_rfa"),
        (sort, "linformer"),  # projections along the length
        (pathfinder_vit, "positive"),
        (digits_swin, "exact"),
        (python_source, "hybrid_gated_deltanet"),  # a stack of two kinds
    ],
)  # each task kind and the kinds whose training differs (learned maps train in tests/models/test_attention_kinds.py)
def test_classifier_language_model_and_vision_runs(module, attention, data_dir, tmp_path):
    layers = {"model__num_decoder_layers": 2} if attention.startswith("hybrid") else {}  # both kinds of the stack
    results = train_and_evaluate(_quick(module, attention, data_dir, **layers), str(tmp_path), progress=False)
    _check_run(results, str(tmp_path))
    if module is python_source:
        assert results["test"]["perplexity"] == pytest.approx(np.exp(results["test"]["loss"]))
    if module in (pathfinder_vit, digits_swin):  # image models: no perplexity; throughput counts pixels
        assert results["kind"] == "image_classification" and "perplexity" not in results["test"]
        assert results["tokens_per_s"] > 0


@pytest.mark.parametrize(
    ("module", "attention", "message"),
    [
        (listops, "gated_rfa", "the gate decays the decoder's causal state, and 'listops' trains a classification"),
        (python_source, "linformer", "'linformer' cannot be causal, and 'python_source' trains a language model"),
        (listops, "deltanet", "'deltanet' cannot be bidirectional, and 'listops' trains a classifier"),
    ],
)
def test_kinds_that_cannot_train_a_task_say_why(module, attention, message, data_dir):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(_quick(module, attention, data_dir))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model__architecture": "resnet"}, "model.architecture must be one of ['vit', 'swin'], got 'resnet'"),
        ({"model__swin_heads": (2,)}, "one value per stage; got 2, 1 and 2 values"),
        ({"model__window_size": 3}, "window_size = 3 does not divide stage 0's 8x8 map of patches"),
        ({"mesh__sequence": 2}, "'digits' trains a model of kind 'image_classification', which does not split its"),
    ],
)
def test_bad_image_model_configs_say_what_is_wrong(overrides, message, data_dir):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(_quick(digits_swin, "exact", data_dir, **overrides))


@pytest.mark.slow
def test_training_lowers_the_loss(data_dir, tmp_path):
    config = _quick(sort, "elu", data_dir, num_train_steps=48, eval_every=48, checkpoint_every=48, log_every=8)
    config.optimizer.learning_rate = 3e-3
    train_and_evaluate(config, str(tmp_path), progress=False)
    losses = [r["loss"] for r in read_metrics(str(tmp_path)) if r["split"] == "train"]
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.slow
def test_a_finished_workdir_is_not_retrained(sort_run):
    config, workdir, results = sort_run
    records = read_metrics(workdir)
    assert train_and_evaluate(config, workdir, progress=False) == results
    assert read_metrics(workdir) == records


# rfa.experiments.train whose run sends itself signal argv[1] once step argv[2] is done (via on_step).
TRAIN_SIGNALLED_AT = """
import functools, os, signal, sys
from rfa.experiments import train
from rfa.experiments.common.cli import run_main

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal (a pytest-xdist worker ignores it)

signum, at_step = int(sys.argv.pop(1)), int(sys.argv.pop(1))
send = lambda step: os.kill(os.getpid(), signum) if step == at_step else None
train.train_and_evaluate = functools.partial(train.train_and_evaluate, on_step=send)
run_main(train.main)
"""


@pytest.mark.slow
def test_ctrl_c_then_kill_9_then_resume_ends_with_the_metrics_of_an_uninterrupted_run(sort_run, tmp_path):
    config, whole, results = sort_run  # 12 steps, logs every 4, checkpoints every 4, keeps 2
    workdir, data_dir = tmp_path / "run", tmp_path / "tfds"  # a data_dir to prepare: its output is checked too
    arguments = ["--config=sort:positive,quick", f"--workdir={workdir}", f"--config.data_dir={data_dir}"]

    def run_until(signum, step):
        command = [sys.executable, "-c", TRAIN_SIGNALLED_AT, str(int(signum)), str(step), *arguments]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)

    done = run_until(signal.SIGINT, 6)  # between two logs: the resumed run must log what this one would have
    assert done.returncode == 130 and done.stdout == ""
    checkpoint = workdir / "checkpoints" / "6"
    assert len(lines(done.stderr)) > 2 and non_progress_lines(done.stderr, "sort") == [
        f"Preparing algorithmic/sort/1.0.0 in {data_dir} (first use: generated here, nothing to download)",
        f"interrupted by SIGINT at step 6: checkpoint saved to {checkpoint}; run the same command to resume",
    ]
    assert sorted(os.listdir(workdir / "checkpoints")) == ["4", "6"]

    done = run_until(signal.SIGKILL, 10)  # resumes from 6; dies after step 10, checkpoint 8 on disk
    assert done.returncode == -signal.SIGKILL
    assert sorted(os.listdir(workdir / "checkpoints")) == ["6", "8"]
    assert [r["step"] for r in read_metrics(str(workdir))] == [4, 8]

    config = _quick(sort, "positive", str(data_dir))
    resumed = train_and_evaluate(config, str(workdir), progress=False)
    assert _deterministic(read_metrics(str(workdir))) == _deterministic(read_metrics(whole))
    assert _deterministic([resumed["test"]]) == _deterministic([results["test"]])


@pytest.mark.slow
def test_sigterm_stops_after_the_step_in_progress_and_restores_the_handlers(sort_run, tmp_path):
    config, whole, _ = sort_run
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def terminate(step):
        if step == 3:  # before the first log: the sums of steps 1-3 are saved with the checkpoint
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(TrainingInterrupted) as stop:
        train_and_evaluate(config, str(tmp_path), progress=False, on_step=terminate)
    assert (stop.value.step, stop.value.signal, stop.value.exit_status) == (3, signal.SIGTERM, 143)
    assert stop.value.checkpoint == str(tmp_path / "checkpoints" / "3")
    assert str(stop.value) == f"interrupted by SIGTERM at step 3: checkpoint saved to {tmp_path / 'checkpoints' / '3'}"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["3"] and read_metrics(str(tmp_path)) == []
    train_and_evaluate(config, str(tmp_path), progress=False)
    assert _deterministic(read_metrics(str(tmp_path))) == _deterministic(read_metrics(whole))


@pytest.mark.slow
def test_a_workdir_of_another_config_is_refused_and_left_alone(sort_run, data_dir):
    workdir = sort_run[1]
    before = {p: os.path.getmtime(os.path.join(r, p)) for r, _, files in os.walk(workdir) for p in files}
    with pytest.raises(ConfigError, match=r"attention.kind: 'positive' -> 'trig'"):
        train_and_evaluate(_quick(sort, "trig", data_dir), workdir, progress=False)
    after = {p: os.path.getmtime(os.path.join(r, p)) for r, _, files in os.walk(workdir) for p in files}
    assert after == before


@pytest.mark.slow
def test_a_workdir_of_release_0_2_reads_back_in_todays_schema(sort_run, tmp_path):
    """0.2 saved ``attention.projection`` and ``attention.phi_sq`` and no ``feature_params``: the finished run is
    read back, not refused, and ``load_model`` builds the model it trained."""
    config, workdir, results = sort_run
    old = tmp_path / "old"
    shutil.copytree(workdir, old)
    saved = json.loads((old / "config.json").read_text())
    attention = saved["attention"]
    attention["projection"] = attention.pop("projection_kind")
    del attention["feature_params"]
    attention["phi_sq"] = 0.0
    (old / "config.json").write_text(json.dumps(saved))
    assert train_and_evaluate(config, str(old), progress=False) == results
    _, loaded, _, step = load_model(str(old))
    assert loaded.attention.projection_kind == "orthogonal" and list(loaded.attention.feature_params) == []
    assert step == 12


def test_a_checkpoint_of_an_earlier_version_resumes_at_its_data_position(tmp_path):
    """Before positions were saved in global batches, each process saved its grain iterator's state (all equal)."""
    state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    iterator = iter(grain.MapDataset.range(10).to_iter_dataset())
    for _ in range(3):
        next(iterator)
    with ocp.CheckpointManager(tmp_path, options=ocp.CheckpointManagerOptions(create=True)) as earlier:
        items = {
            "state": ocp.args.StandardSave(nnx.to_pure_dict(state)),
            "data": grain.checkpoint.CheckpointSave(iterator),
        }
        earlier.save(4, args=ocp.args.Composite(**items))
    step, restored, position = Checkpoints(str(tmp_path)).restore_latest(state)
    assert step == 4 and position == {"next_index": 3}
    assert jax.tree.all(jax.tree.map(np.array_equal, nnx.to_pure_dict(restored), nnx.to_pure_dict(state)))


@pytest.mark.parametrize(
    ("feature_params", "message"),
    [
        ((("phi_sqq", 2.0),), "oprf has the parameters ['phi_sq'], each a number; got phi_sqq=2.0"),
        ((("phi_sq", "big"),), "got phi_sq='big'"),
        (("phi_sq",), "must be ((name, value), ...)"),
    ],
)
def test_feature_params_of_the_training_config_are_checked(feature_params, message, data_dir):
    config = _quick(sort, "oprf", data_dir)
    config.attention.feature_params = feature_params
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(config)


def test_a_fixed_feature_param_reaches_every_site(data_dir):
    config = _quick(sort, "oprf", data_dir)
    config.attention.feature_params = (("phi_sq", 8.0),)
    model = model_config(config, check_config(config))
    sites = (model.encoder_attention, model.decoder_attention, model.cross_attention)
    assert [site.options.params for site in sites] == [{"phi_sq": 8.0}] * 3


@pytest.mark.slow
def test_a_corrupt_checkpoint_is_named(sort_run, tmp_path):
    config, workdir, _ = sort_run
    shutil.copytree(workdir, tmp_path / "run")
    for path in (tmp_path / "run" / "checkpoints" / "12" / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"checkpoint step 12 .* cannot be restored"):
        train_and_evaluate(config, str(tmp_path / "run"), progress=False)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("task", "nope", "config.task: unknown task 'nope'"),
        ("checkpoint_every", 6, "must be a multiple of config.log_every"),
        ("batch_size", 0, "config.batch_size must be an integer >= 1, got 0"),
        ("model.num_heads", 3, "divisible"),
        ("optimizer.label_smoothing", 1.0, r"label_smoothing must be in \[0, 1\), got 1.0"),
        ("attention.redraw_every", -1, "redraw_every must be an integer >= 0, got -1"),
        ("mesh.model", 3, "config.mesh: mesh.model must be >= 1 and divide the 1 devices, got 3"),
    ],
)
def test_bad_configs_name_the_field(field, value, message, tmp_path):
    config = _quick(sort)
    *parents, leaf = field.split(".")
    node = config
    for parent in parents:
        node = node[parent]
    node[leaf] = value
    with pytest.raises(ConfigError, match=message):
        train_and_evaluate(config, str(tmp_path), progress=False)
    assert not os.path.exists(tmp_path / "config.json")


def test_a_run_resumed_on_processes_its_batch_does_not_divide_over_is_refused_with_the_reason(monkeypatch):
    """A run of 2 processes (global batch 8) relaunched on 3: each process's block of rows would not be whole, so
    the data order could not be kept; the run stops before it builds anything, naming the batch and the count."""
    from rfa.train import loop

    mesh = loop.sharding.make_mesh(1)
    monkeypatch.setattr(jax, "process_count", lambda: 3)
    with pytest.raises(ConfigError, match=r"batch_size = 8 must be divisible by .* and the 3 processes"):
        loop._check_batch(_quick(sort), mesh)


@pytest.mark.parametrize("workdir", ["gs://bucket/runs/sort", "file:///tmp/runs/sort"])
def test_a_workdir_given_as_a_url_is_refused_before_anything_is_built(workdir):
    with pytest.raises(ConfigError, match="is a URL: rfa writes its config, metrics and results with local file I/O"):
        train_and_evaluate(_quick(sort), workdir, progress=False)


def test_unknown_attention_variant_is_refused():
    with pytest.raises(ConfigError, match=r"<attention> one of .*'positive_iid'.*got 'softmaxx'"):
        sort.get_config("softmaxx")
    with pytest.raises(ConfigError, match="got 'positive,slow'"):
        sort.get_config("positive,slow")


SHARDED_RUNS = """
import json, sys
import jax
from rfa.configs.tasks import sort
from rfa.train import read_metrics, train_and_evaluate
from rfa.workdir import ConfigError

data_dir, workdir = sys.argv[1:]
losses = {}
config = sort.get_config("positive,quick")
config.data_dir, config.mesh.data, config.mesh.model = data_dir, 4, 2  # data and model parallelism at once
train_and_evaluate(config, f"{workdir}/4x2", progress=False)
losses["4x2"] = [r["loss"] for r in read_metrics(f"{workdir}/4x2")]
from rfa.tasks import get_task
from rfa.train.loop import initial_state
from rfa.train import make_mesh, state_sharding
_, state = initial_state(config, get_task("sort"))
specs = jax.tree_util.tree_flatten_with_path(state_sharding(state, make_mesh(4, 2)))[0]
losses["specs"] = sorted({jax.tree_util.keystr(p).split("]")[-3] + "] " + str(s.spec) for p, s in specs
                          if "kernel" in jax.tree_util.keystr(p) and "opt_state" not in jax.tree_util.keystr(p)})
config.batch_size, config.mesh.data, config.mesh.model = 12, 8, 1
try:
    train_and_evaluate(config, f"{workdir}/bad", progress=False)
except ConfigError as error:
    losses["error"] = str(error)
print(json.dumps(losses))
"""


@pytest.mark.slow
def test_eight_devices_match_one_device(sort_run, data_dir, tmp_path):
    """A data- and model-parallel run on 8 host devices reproduces the metrics of the in-process 1-device run."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", SHARDED_RUNS, data_dir, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    losses = json.loads(done.stdout.strip().splitlines()[-1])
    assert "batch_size = 12 must be divisible by the 8 data-parallel devices" in losses.pop("error")
    assert losses.pop("specs") == [  # heads of q/k/v/out and the MLP's hidden units over "model"
        "['hidden'] P(None, 'model')",
        "['key'] P(None, 'model', None)",
        "['out'] P('model', None, None)",
        "['output'] P('model', None)",
        "['query'] P(None, 'model', None)",
        "['value'] P(None, 'model', None)",
    ]
    reference = [r["loss"] for r in read_metrics(sort_run[1])]
    assert len(reference) == 4 and sorted(losses) == ["4x2"]  # three training windows and the evaluation
    for mesh, values in losses.items():
        np.testing.assert_allclose(values, reference, rtol=2e-5, err_msg=mesh)


@pytest.mark.slow
def test_decode_answers_inputs_from_the_command_line_and_a_file(sort_run, tmp_path):
    workdir = sort_run[1]
    (tmp_path / "inputs.txt").write_text("dcba\nhello\n")
    decode = [
        "rfa.experiments.decode",
        "--workdir",
        workdir,
        "--input",
        "abc",
        "--input_file",
        f"{tmp_path}/inputs.txt",
    ]
    for done in run_in_turn([decode, [*decode, "--beam_size", "2"]]):  # greedy, then beam search
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert [line.split("\t")[0] for line in lines] == ["abc", "dcba", "hello"]
        assert all(len(line.split("\t")) == 2 for line in lines)
    assert "sort / positive, checkpoint step 12" in done.stderr
