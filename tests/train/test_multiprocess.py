"""Multi-process training on one host: 2 processes of 2 CPU devices, jax.distributed over 127.0.0.1.

Each test launches ``rfa train`` as a user would (``JAX_COORDINATOR_ADDRESS`` on a free port
the test chooses, ``JAX_NUM_PROCESSES=2``, ``JAX_PROCESS_ID``), bounded in time, and holds the run to a single
process with the same 4 devices: the same metrics at every logged step, written once, after a run of 2 processes
(one of them slowed in its input) is stopped with SIGTERM, resumed on 1 process of 4 devices, killed, and resumed
on 2 processes again, each process reading only its rows of every batch; and it starts one process with no
coordinator.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH_TIMEOUT = 240  # seconds a launch may take before the test fails (processes are killed)
CONFIG = "mqar:positive,quick"  # its rows are its examples: each process reads only its rows
BATCH = 16
STEPS = (
    f"--config.batch_size={BATCH}",
    "--config.num_train_steps=16",
    "--config.log_every=4",
    "--config.eval_every=16",
    "--config.checkpoint_every=4",
    "--config.attention.redraw_every=8",
)  # a redraw merges, changes and lays out the state again (at step 8: where the killed run's relaunch resumes)
SEQUENCE = ("--config.mesh.data=2", "--config.mesh.sequence=2")  # data across the processes, sequence within each
# `python -c SLOW_INPUT <rfa train's arguments>`: rfa train with a sleep in its input, for every example it reads.
SLOW_INPUT = """
import runpy, sys, time
from rfa.tasks import task_kind

kind = task_kind("recall")
examples = kind.examples


def slow(example):
    time.sleep(0.02)
    return example


kind.examples = lambda *args, **kwargs: examples(*args, **kwargs).map(slow)
runpy.run_module("rfa.experiments.train", run_name="__main__", alter_sys=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(workdir, data_dir, *extra, processes=2, devices=2, port=None, ids=None, env=None, slow=()):
    """Starts ``processes`` training processes of ``devices`` CPU devices each; returns the ``Popen`` s. The
    processes whose ids are in ``slow`` sleep in their input."""
    port = port or free_port()
    arguments = ["--config", CONFIG, "--workdir", str(workdir), f"--config.data_dir={data_dir}", *STEPS, *extra]
    base = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONUNBUFFERED": "1",
        # conftest's flags (compile at optimisation level 0) kept
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}",
        **(env or {}),
    }
    if processes > 1:
        base |= {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(processes)}
    procs = []
    for i in range(processes) if ids is None else ids:
        env = base | ({"JAX_PROCESS_ID": str(i)} if processes > 1 else {})
        command = [sys.executable, *(("-c", SLOW_INPUT) if i in slow else ("-m", "rfa.experiments.train")), *arguments]
        procs.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    return procs


def finish(procs, timeout=LAUNCH_TIMEOUT) -> list[tuple[int, str, str]]:
    """``(returncode, stdout, stderr)`` of each process; kills them all if any outlives ``timeout``."""
    deadline, done = time.monotonic() + timeout, []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
            done.append((proc.returncode, out, err))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        pytest.fail(f"processes still running after {timeout} s: {[p.communicate()[1][-2000:] for p in procs]}")
    return done


def run(workdir, data_dir, *extra, **options) -> list[tuple[int, str, str]]:
    done = finish(launch(workdir, data_dir, *extra, **options))
    assert all(code == 0 for code, _, _ in done), [err[-3000:] for _, _, err in done]
    return done


def metrics(workdir) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def assert_same_metrics(workdir, reference, rel=1e-5) -> None:
    """Every logged record of ``workdir`` equals ``reference``'s (wall-clock fields aside), each written once."""
    ours, theirs = metrics(workdir), metrics(reference)
    keys = [(r["split"], r["step"]) for r in ours]
    assert keys == [(r["split"], r["step"]) for r in theirs] and len(set(keys)) == len(keys), keys
    for a, b in zip(ours, theirs, strict=True):
        for name in ("loss", "accuracy"):
            assert a[name] == pytest.approx(b[name], rel=rel, abs=1e-6), (a["split"], a["step"], name)


def wait_for_checkpoint(workdir, step: int, procs, timeout=LAUNCH_TIMEOUT) -> None:
    path, deadline = os.path.join(workdir, "checkpoints", str(step)), time.monotonic() + timeout
    while not os.path.isdir(path):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            pytest.fail(f"no checkpoint {step} in {workdir}: {[p.communicate()[1][-2000:] for p in procs]}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def single(data_dir, tmp_path_factory):
    """The workdir of one process with the same 4 devices, data parallel, checkpointing only at the end (saving
    changes no number: the relaunched runs' metrics equal a run that never stopped)."""
    workdir = tmp_path_factory.mktemp("single")
    run(workdir, data_dir, "--config.checkpoint_every=16", processes=1, devices=4)
    return workdir


def test_processes_read_their_rows_stop_together_and_resume_on_other_process_counts(single, data_dir, tmp_path):
    """2 processes of 2 devices (data 2 across them x sequence 2 within each), process 1 slowed by a sleep for every
    example it reads: SIGTERM to process 0 stops both after the same step with a checkpoint. The run resumes on 1
    process of 4 devices (2 x 2 -> 1 x 4), is killed with SIGKILL after its next checkpoint, and ends on 2
    processes again (1 x 4 -> 2 x 2) with the metrics of one process (sequence-parallel sums in another order:
    equal to float32 rounding), each written once; each process read only its half of every batch, and only
    process 0 prints the results."""
    procs = launch(tmp_path, data_dir, *SEQUENCE, slow=[1])
    wait_for_checkpoint(tmp_path, 4, procs)
    procs[0].send_signal(signal.SIGTERM)
    done = finish(procs)
    assert [code for code, _, _ in done] == [128 + signal.SIGTERM] * 2, [err[-2000:] for _, _, err in done]
    steps = [int(err.split("interrupted by SIGTERM at step ")[1].split(":")[0]) for _, _, err in done]
    # stopped a step or two after checkpoint 4; the relaunch is killed after the next periodic checkpoint, which
    # must come before the last step (16)
    assert steps[0] == steps[1] < 12 and os.path.isdir(tmp_path / "checkpoints" / str(steps[0])), steps
    procs = launch(tmp_path, data_dir, *SEQUENCE, processes=1, devices=4)
    wait_for_checkpoint(tmp_path, 4 * (steps[0] // 4 + 1), procs)
    procs[0].send_signal(signal.SIGKILL)
    finish(procs)
    assert not os.path.exists(tmp_path / "results.json")  # killed before the end
    done = run(tmp_path, data_dir, *SEQUENCE)
    assert_same_metrics(tmp_path, single, rel=1e-4)
    with open(tmp_path / "results.json") as f:
        results = json.load(f)
    assert results["devices"] == 4 and results["steps"] == 16
    assert results["input_examples_per_step"] == [BATCH / 2] * 2  # of this launch's steps, per process
    with open(single / "results.json") as f:
        assert json.load(f)["input_examples_per_step"] == [BATCH]
    printed = done[0][1]  # the results JSON, after the lines Gloo prints when it connects
    assert json.loads(printed[printed.index("{\n") :])["test"] == results["test"]
    assert '"test"' not in done[1][1]  # printed by process 0 only


def test_a_process_that_cannot_reach_the_coordinator_fails_in_one_line_within_the_timeout(data_dir, tmp_path):
    began = time.monotonic()
    ((code, _, err),) = finish(launch(tmp_path, data_dir, ids=[1], env={"RFA_COORDINATOR_TIMEOUT": "5"}), timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and time.monotonic() - began < 120
    assert lines[-1].startswith("error: process 1 of 2 could not join the run at 127.0.0.1:"), err[-3000:]
    assert "within 5 s" in lines[-1] and "Traceback" not in err
