"""A training step with the sequence split over a mesh axis equals the unsharded step (8 CPU devices).

JAX fixes its device count at start-up, so the checks run in one subprocess with
``--xla_force_host_platform_device_count=8`` and report as JSON. Each case builds a quick config's model
and optimizer, takes one real batch of its task, and runs the trainer's jitted step twice: on one device
(mesh 1 x 1 x 1) and on a (data 2, sequence 4) mesh, where every token array is split along its length
and the kernelized sites run ``rfa.attention.sequence_parallel_attention`` (counted, so a silent
fallback to unsplit attention cannot pass). The updated parameters, optimizer state and metric sums
must agree. Cases: positive features in an encoder-decoder (bidirectional, causal and cross-attention),
gated RFA (per-token decay and key weights split with the tokens), Hedgehog in a language model
(learned map parameters, gradients summed over the blocks) and exact attention in a classifier (XLA
splits it; its key bias, whose gradient is 0 up to rounding, is left out). Positive features' steps are those of
``train_and_evaluate`` itself, with ``config.mesh.sequence = 4`` and unsharded, for 4 steps: the states the two
runs checkpoint at the end (parameters and optimizer state) and their logged training metrics agree, and the
sharded run ends with the validation metrics of the unsharded one (one run of each serves both checks, where a
separate pair of one-step programs cost two more compilations).
"""

import pytest
from helpers import run_on_devices

CHECKS = r"""
import json, os, sys, tempfile
import jax, jax.numpy as jnp, numpy as np
import orbax.checkpoint as ocp
from rfa.configs.tasks import listops, python_source, sort
import rfa.attention.kernelized.api as api
from rfa.tasks import train_batches
from rfa.train import sharding, state_sharding, train_and_evaluate
from rfa.train.config import check_config
from rfa.train.loop import initial_state
from rfa.train.metrics import read_metrics
from rfa.train.steps import make_train_step
from rfa.workdir import ConfigError

data_dir = sys.argv[1]
calls = {"count": 0}
parallel = api.sequence_parallel_attention  # what attention_over hands the model's kernelized sites
def counted(*args, **kwargs):
    calls["count"] += 1
    return parallel(*args, **kwargs)
api.sequence_parallel_attention = counted

def quick(module, attention, **mesh):
    config = module.get_config(f"{attention},quick")
    config.data_dir = data_dir
    for name, value in mesh.items():
        config.mesh[name] = value
    return config

def one_step(module, attention, **mesh):
    config = quick(module, attention, **mesh)
    task = check_config(config)
    graphdef, state = initial_state(config, task)
    mesh = sharding.make_mesh(config.mesh.data, config.mesh.model, config.mesh.sequence)
    shardings = state_sharding(state, mesh)
    state = jax.device_put(state, shardings)
    batch = next(iter(train_batches(task, data_dir=data_dir, batch_size=config.batch_size,
                                    max_length=config.max_length, seed=0)))
    step = make_train_step(graphdef, kind=task.kind, label_smoothing=0.0, seed=0, state_sharding=shardings)
    calls["count"] = 0
    with jax.set_mesh(mesh):
        state, sums = step(state, sharding.global_batch(batch, mesh), jnp.int32(3))
    return jax.device_get(state), jax.device_get(sums), calls["count"]

def trained(**mesh):
    # train_and_evaluate for 4 steps; the state it checkpoints at the end (parameters and optimizer state)
    config = quick(sort, "positive", **mesh)
    config.num_train_steps = 4
    workdir = tempfile.mkdtemp()
    calls["count"] = 0
    results = train_and_evaluate(config, workdir, progress=False)
    state = ocp.StandardCheckpointer().restore(os.path.join(workdir, "checkpoints", "4", "state"))
    logged = [r for r in read_metrics(workdir) if r["split"] == "train"]
    return results, state, logged, calls["count"]

def error(a, b):
    if jnp.issubdtype(jnp.asarray(a).dtype, jax.dtypes.prng_key):
        a, b = jax.random.key_data(a), jax.random.key_data(b)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-30)) if a.size else 0.0

def compare(state, ref_state, leaves_kept=lambda path: True):
    errors = jax.tree_util.tree_flatten_with_path(jax.tree.map(error, state, ref_state))[0]
    return [e for path, e in errors if leaves_kept(jax.tree_util.keystr(path))]

report = {}
split, split_state, split_logged, count = trained(data=2, sequence=4)
whole, whole_state, whole_logged, _ = trained(data=1, sequence=1)
leaves = compare(split_state, whole_state)
metrics = ("loss", "accuracy", "perplexity", "sequence_accuracy")  # the logged means of the steps' metric sums
assert [r["step"] for r in split_logged] == [r["step"] for r in whole_logged] == [4], (split_logged, whole_logged)
report["sort/positive"] = {
    "state": max(leaves), "leaves": len(leaves), "parallel_calls": count,
    "sums": max(error(a[name], b[name]) for a, b in zip(split_logged, whole_logged) for name in metrics),
}
report["train_and_evaluate"] = {
    name: error(split["validation"][name], whole["validation"][name]) for name in ("loss", "accuracy", "perplexity")
}

for module, attention in ((sort, "gated_rfa"), (python_source, "hedgehog"), (listops, "exact")):
    ref_state, ref_sums, _ = one_step(module, attention, data=1, sequence=1)
    state, sums, count = one_step(module, attention, data=2, sequence=4)
    # Softmax is invariant to the key bias (it adds q.b to every logit of a query): its gradient is rounding
    # noise, which Adam's first step turns into +-learning_rate, so exact attention's key bias is left out.
    leaves = compare(state, ref_state, lambda path: not (attention == "exact" and "'key']['bias']" in path))
    report[f"{module.__name__.split('.')[-1]}/{attention}"] = {
        "state": max(leaves), "leaves": len(leaves), "sums": max(error(sums[k], ref_sums[k]) for k in sums),
        "parallel_calls": count,
    }

def message(**fields):
    config = quick(python_source, fields.pop("attention", "positive"))
    for name, value in fields.items():
        *section, leaf = name.split("__")
        (config[section[0]] if section else config)[leaf] = value
    try:
        train_and_evaluate(config, tempfile.mkdtemp(), progress=False)
    except ConfigError as e:
        return str(e)
    return None

report["errors"] = {
    "indivisible_length": message(mesh__sequence=8, max_length=20),
    "too_many_devices": message(mesh__sequence=4, mesh__data=4),
    "causal_linformer": message(mesh__sequence=2, attention="linformer"),
}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report(data_dir):
    return run_on_devices(CHECKS, data_dir)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sort/positive", "sort/gated_rfa", "python_source/hedgehog", "listops/exact"])
def test_a_sequence_sharded_step_equals_the_unsharded_step(report, case):
    errors = report[case]
    assert errors["state"] < 1e-4 and errors["sums"] < 1e-5, errors
    assert errors["leaves"] > 10
    kernelized = case != "listops/exact"
    assert (errors["parallel_calls"] > 0) == kernelized, errors  # traced once per kernelized site


@pytest.mark.slow
def test_a_sequence_sharded_run_ends_with_the_unsharded_metrics(report):
    assert max(report["train_and_evaluate"].values()) < 1e-4, report["train_and_evaluate"]


@pytest.mark.slow
def test_sequence_sharding_refuses_what_it_cannot_split(report):
    messages = report["errors"]
    assert "config.max_length = 20 must be divisible by config.mesh.sequence = 8" in messages["indivisible_length"]
    assert "needs 16 devices; 8 are present" in messages["too_many_devices"]
    assert "'linformer' cannot be causal" in messages["causal_linformer"]
