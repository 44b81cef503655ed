"""Scale-out with ``jax.sharding``: a ``(data, sequence, model)`` device mesh, batch and parameter shardings.

Data parallelism shards every batch along its first axis over ``data`` and replicates the
parameters; with a ``model`` axis > 1 the attention heads and the MLP's hidden units are split
over ``model`` as well (:func:`state_sharding`, :mod:`rfa.models.sharding`'s rules). With a ``sequence`` axis > 1 every
token array is split along its length too: the model's kernelized sites exchange states over that
axis (LASP-2, :func:`rfa.attention.sequence_parallel_attention`; the model is built with
``sequence_axis="sequence"``), and XLA splits the other layers along the length (exact attention
gathers the keys it needs). Optimizer moments follow their parameters' sharding because their
paths end the same way. Multi-process runs call :func:`initialize_distributed` first; every process then
reads its block of rows of the same global batch (:func:`process_shard`) and contributes it (:func:`global_batch`),
and :func:`put` lays out state that every process holds. The mesh puts ``data`` outermost, so the
``sequence`` and ``model`` axes lie within a process and only data parallelism crosses processes.
"""

from __future__ import annotations

import os
import socket
import time

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH_AXES = ("data", "sequence", "model")
SEQUENCE_AXIS = "sequence"
COORDINATOR_TIMEOUT = "RFA_COORDINATOR_TIMEOUT"  # seconds to reach the coordinator (default 300, JAX's)


class DistributedError(RuntimeError):
    """A multi-process launch that could not start: the coordinator was not reached in time."""


_LAUNCHERS = (("SLURM_NTASKS", "SLURM_STEP_NODELIST"), ("OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_hnp_uri"))
"""A scheduler's count of processes, and the variable its launcher (srun, mpirun) sets in each process it starts:
an sbatch script of 4 tasks sets ``SLURM_NTASKS=4`` in the one process that runs the script itself."""


def initialize_distributed() -> bool:
    """Calls ``jax.distributed.initialize()`` when a multi-process launch is detected; returns whether it did.

    Detected: ``JAX_COORDINATOR_ADDRESS`` with ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` (passed
    on to ``initialize``), or a process that srun or mpirun started among several, or ``RFA_DISTRIBUTED=1`` (a
    Cloud TPU slice of several hosts), for which JAX finds the coordinator, process count and id itself.
    ``RFA_COORDINATOR_TIMEOUT`` (seconds, default 300) bounds the wait for the coordinator and the other
    processes. Tested with 2 processes on one host (tests/train/test_multiprocess.py), and each launcher's
    environment faked (tests/train/test_launch_detection.py); clusters are not.

    Raises:
      DistributedError: a process other than 0 found no coordinator at the address within the timeout (one
        line naming the address, the process and what to check). Process 0 serves the coordinator; if the
        others do not join it in time, JAX itself ends the process with its own message.
    """
    timeout = int(os.environ.get(COORDINATOR_TIMEOUT, "300"))
    if "JAX_COORDINATOR_ADDRESS" in os.environ:
        address = os.environ["JAX_COORDINATOR_ADDRESS"]
        options = dict(
            coordinator_address=address,
            num_processes=int(os.environ["JAX_NUM_PROCESSES"]) if "JAX_NUM_PROCESSES" in os.environ else None,
            process_id=int(os.environ["JAX_PROCESS_ID"]) if "JAX_PROCESS_ID" in os.environ else None,
        )
        if options["process_id"] != 0:  # JAX aborts the process when it cannot connect: look first, and say so
            _wait_for_coordinator(address, timeout, options["process_id"], options["num_processes"])
        jax.distributed.initialize(initialization_timeout=timeout, **options)
        return True
    if os.environ.get("RFA_DISTRIBUTED") == "1" or any(
        int(os.environ.get(count, "1")) > 1 and launched in os.environ for count, launched in _LAUNCHERS
    ):  # JAX finds the coordinator itself (SLURM, Open MPI, Cloud TPU's metadata)
        jax.distributed.initialize(initialization_timeout=timeout)
        return True
    return False


def _wait_for_coordinator(address: str, timeout: float, process_id, num_processes) -> None:
    """Returns once the coordinator at ``host:port`` accepts connections; raises DistributedError after ``timeout``."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
            return
        except OSError as error:
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"process {process_id} of {num_processes} could not join the run at {address} within {timeout} s "
                    f"({error.strerror or error}): start every process with the same JAX_COORDINATOR_ADDRESS "
                    f"(process 0 serves it) and check that the port is reachable; {COORDINATOR_TIMEOUT} sets the wait."
                ) from None
            time.sleep(0.5)


def make_mesh(data: int, model: int = 1, sequence: int = 1) -> jax.sharding.Mesh:
    """A ``(data, sequence, model)`` mesh over ``data * sequence * model`` devices; ``data=-1`` takes all devices
    left after the others.

    Example:
      >>> mesh = make_mesh(-1)  # pure data parallelism over every device; with 8: make_mesh(2, model=2, sequence=2)
      >>> mesh.axis_names
      ('data', 'sequence', 'model')
    """
    count = jax.device_count()
    for name, size in (("model", model), ("sequence", sequence)):
        if size < 1 or count % size:
            raise ValueError(f"mesh.{name} must be >= 1 and divide the {count} devices, got {size}.")
    data = count // (model * sequence) if data == -1 else data
    used = data * sequence * model
    if data < 1 or used > count:
        raise ValueError(
            f"mesh data x sequence x model = {data} x {sequence} x {model} needs {used} devices; {count} are present."
        )
    if jax.process_count() > 1 and used != count:
        raise ValueError(
            f"a multi-process mesh must use all {count} devices, got data x sequence x model = {data} x {sequence} x "
            f"{model}."
        )
    if jax.process_count() > 1 and data % jax.process_count():
        raise ValueError(
            f"mesh.data = {data} must be divisible by the {jax.process_count()} processes: each process loads whole "
            "rows of the batch, so the sequence and model axes must lie within a process."
        )
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)  # XLA propagates shardings from inputs
    return jax.make_mesh((data, sequence, model), MESH_AXES, axis_types=auto, devices=jax.devices()[:used])


def batch_sharding(mesh: jax.sharding.Mesh, ndim: int = 1) -> NamedSharding:
    """Rows over ``data``; for token arrays (``ndim >= 2``: ``[batch, length, ...]``) the length over ``sequence``."""
    return NamedSharding(mesh, P("data", SEQUENCE_AXIS) if ndim >= 2 else P("data"))


def process_shard() -> tuple[int, int]:
    """``(process_index, process_count)``: the block of rows of every global batch that this process reads."""
    return jax.process_index(), jax.process_count()


def global_batch(batch: dict, mesh: jax.sharding.Mesh) -> dict:
    """This process's rows ``[B / processes, ...]`` assembled into global arrays sharded over ``data`` (and
    ``sequence`` along the length)."""
    return {
        key: jax.make_array_from_process_local_data(batch_sharding(mesh, np.ndim(value)), value)
        for key, value in batch.items()
    }


def put(tree, shardings):
    """``jax.device_put(tree, shardings)`` that also works when the shardings span several processes.

    Every process holds the same ``tree`` (built from the same seed, or restored from the same files); with
    several processes each global array is assembled from the shards this process addresses
    (``jax.make_array_from_callback``), PRNG keys through their key data; leaves that already span the processes
    (the unchanged leaves of a state merged, changed and split again) are kept.
    """
    if jax.process_count() == 1:
        return jax.device_put(tree, shardings)

    def global_array(x, sharding):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:  # already global (a leaf of an earlier put)
            return x
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            data = global_array(jax.random.key_data(x), sharding)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(global_array, tree, shardings)
