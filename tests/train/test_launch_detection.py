"""How a process learns that it is one of several: each launcher's environment faked, and what rfa decides from it.

``rfa.train.sharding.initialize_distributed`` decides whether to call ``jax.distributed.initialize``; JAX then
finds the coordinator, the process count and this process's id itself (SLURM, Open MPI) or takes them from rfa
(``JAX_COORDINATOR_ADDRESS``). Here ``initialize`` is replaced by JAX's own resolution of those parameters
(``ClusterEnv.auto_detect_unset_distributed_params``, what ``initialize`` runs first) from the faked environment,
so a test sees the coordinator, count and id a real launch would use, without starting one. ``RFA_DISTRIBUTED=1``
(a Cloud TPU slice, whose parameters come from its metadata server) can only be checked for rfa's decision.
"""

import os

import jax
import pytest
from jax._src.clusters import ClusterEnv

from rfa.train import sharding

LAUNCH_VARIABLES = ("SLURM_", "OMPI_", "JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "RFA_")
SLURM_STEP = {  # what srun sets in each task of a 4-task step on 2 nodes (the task of rank 2, first on its node)
    "SLURM_JOB_ID": "1234",
    "SLURM_STEP_NODELIST": "node[007-008]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_NTASKS": "4",
    "SLURM_PROCID": "2",
    "SLURM_LOCALID": "0",
}
OPEN_MPI = {  # what mpirun -np 2 sets in the process of rank 1
    "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
}


@pytest.fixture
def launch(monkeypatch):
    """``launch(env) -> (initialized, resolved, waited)``: rfa's decision in environment ``env`` (nothing else of a
    launcher's), the parameters JAX would initialize with (None when rfa did not initialize), and the coordinator
    rfa waited for before initializing (None when it did not wait)."""

    def run(env: dict[str, str]):
        for name in [n for n in os.environ if n.startswith(LAUNCH_VARIABLES)]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        resolved, waited = [], []

        def initialize(coordinator_address=None, num_processes=None, process_id=None, *, initialization_timeout):
            found = ClusterEnv.auto_detect_unset_distributed_params(
                coordinator_address, num_processes, process_id, None, None, initialization_timeout
            )
            resolved.append((*found, initialization_timeout))

        monkeypatch.setattr(jax.distributed, "initialize", initialize)
        monkeypatch.setattr(sharding, "_wait_for_coordinator", lambda address, *rest: waited.append(address))
        initialized = sharding.initialize_distributed()
        assert len(resolved) == int(initialized)
        return initialized, resolved[0] if resolved else None, waited[0] if waited else None

    return run


def test_a_plain_process_is_one_process(launch):
    assert launch({}) == (False, None, None)


def test_a_slurm_step_of_several_tasks_initializes_with_slurms_coordinator_count_and_rank(launch):
    port = 1234 % 2**12 + 65535 - 2**12 + 1  # JAX's port for job 1234
    assert launch(SLURM_STEP) == (True, (f"node007:{port}", 4, 2, [0], 300), None)


def test_slurm_without_a_step_or_with_one_task_is_one_process(launch):
    """An sbatch script asking for 4 tasks sets SLURM_NTASKS=4 in the script itself, where one process runs (no
    srun step, so no SLURM_STEP_* variables): initializing there would fail to find its coordinator."""
    batch_script = {name: value for name, value in SLURM_STEP.items() if not name.startswith("SLURM_STEP_")}
    assert launch(batch_script) == (False, None, None)
    assert launch({**SLURM_STEP, "SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) == (False, None, None)


def test_open_mpi_initializes_with_the_launchers_address_size_and_rank(launch):
    port = 1531576320 // 2**12 % 2**12 + 65535 - 2**12 + 1  # JAX's port for this job id
    assert launch(OPEN_MPI) == (True, (f"10.96.0.1:{port}", 2, 1, [1], 300), None)
    assert launch({**OPEN_MPI, "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}) == (False, None, None)


def test_an_explicit_coordinator_is_passed_on_and_the_others_wait_for_it(launch, monkeypatch):
    coordinator = {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:5555", "JAX_NUM_PROCESSES": "3"}
    assert launch({**coordinator, "JAX_PROCESS_ID": "0"}) == (True, ("127.0.0.1:5555", 3, 0, None, 300), None)
    waited = launch({**coordinator, "JAX_PROCESS_ID": "2", "RFA_COORDINATOR_TIMEOUT": "7"})
    assert waited == (True, ("127.0.0.1:5555", 3, 2, None, 7), "127.0.0.1:5555")  # process 0 serves; 2 waits
    over_slurm = launch({**SLURM_STEP, **coordinator, "JAX_PROCESS_ID": "1"})  # the explicit address wins
    assert over_slurm[1][:3] == ("127.0.0.1:5555", 3, 1)


def test_rfa_distributed_asks_jax_to_find_the_rest(launch, monkeypatch):
    """A Cloud TPU slice: JAX reads its parameters from the TPU metadata server, which this test cannot fake, so
    only rfa's decision is checked: it initializes and passes nothing of its own."""
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **options: calls.append(options))
    for name in [n for n in os.environ if n.startswith(LAUNCH_VARIABLES)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RFA_DISTRIBUTED", "1")
    assert sharding.initialize_distributed() and calls == [{"initialization_timeout": 300}]
