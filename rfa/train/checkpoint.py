"""Checkpoints with orbax: model and optimizer state, the data iterator's position and the step.

One ``ocp.CheckpointManager`` directory per workdir (``<workdir>/checkpoints/<step>``), each
step holding ``state`` (``nnx.to_pure_dict`` of the model and optimizer state without RNG
streams: dropout keys are derived from the step), ``data_position`` (the training stream's position in
global batches, the same for every process count: ``rfa.data.pipeline.global_position``) and, for a
run stopped between two logs, ``metric_sums`` (the training-metric sums of the steps since the
last log, so that the resumed run logs the same averages). Orbax writes each step to a temporary
directory and renames it when complete, so a killed run leaves only whole checkpoints; a
preservation policy keeps the latest ``keep`` steps (and every ``keep_every``-th step, if set). The state
restores into the shardings of the run that reads it, so a run resumes on another number of processes and
devices (orbax reads each array's shards where the new mesh puts them).
"""

from __future__ import annotations

import glob
import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

_METRIC_SUMS = "metric_sums"  # not "metrics": CheckpointManager reserves that item for its own JSON
_POSITION = "data_position"
_PER_PROCESS_POSITION = "data"  # earlier versions: grain's iterator state, one file per process (all equal)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be restored into this run's model (corrupt, or from another model)."""


def _split_rngs(state: nnx.State) -> tuple[nnx.State, nnx.State]:
    return nnx.split_state(state, nnx.RngState, ...)


class Checkpoints:
    """Saves and restores ``(state, data position)`` of a training run.

    Example:
      >>> import tempfile
      >>> state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
      >>> checkpoints = Checkpoints(tempfile.mkdtemp(), keep=2)
      >>> checkpoints.restore_latest(state)[0]  # (0, state, None) when there is none
      0
      >>> checkpoints.save(1, state, {"next_index": 32})
      >>> step, state, position = checkpoints.restore_latest(state)
      >>> step, position
      (1, {'next_index': 32})
    """

    def __init__(self, directory: str, *, keep: int = 2, keep_every: int = 0):
        if keep < 1 or keep_every < 0:
            raise ValueError(f"keep must be >= 1 and keep_every >= 0, got keep={keep}, keep_every={keep_every}.")
        policies = [ocp.checkpoint_managers.LatestN(keep)]
        if keep_every:
            policies.append(ocp.checkpoint_managers.EveryNSteps(keep_every))
        self.directory = os.path.abspath(directory)
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
                enable_async_checkpointing=False,
                create=True,
            ),
        )

    def save(self, step: int, state: nnx.State, position: dict, *, metrics: dict | None = None) -> None:
        """Saves ``state`` and the data ``position`` as step ``step``.

        Args:
          step: the number of completed training steps.
          state: the model and optimizer state (RNG streams are left out).
          position: where the training stream's next batch starts, as JSON (every process's: process 0 writes it).
          metrics: metric sums not yet logged (a run stopped between two logs), or None.
        """
        _, saved = _split_rngs(state)
        items = {"state": ocp.args.StandardSave(nnx.to_pure_dict(saved)), _POSITION: ocp.args.JsonSave(position)}
        if metrics is not None:  # host arrays restore without a target, keeping their dtypes
            items[_METRIC_SUMS] = ocp.args.StandardSave(jax.tree.map(np.asarray, jax.device_get(metrics)))
        self.manager.save(step, args=ocp.args.Composite(**items))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def step_directory(self, step: int) -> str:
        """Where the checkpoint of ``step`` is (or will be) written."""
        return os.path.join(self.directory, str(step))

    def pending_metrics(self, step: int) -> dict | None:
        """The metric sums saved with ``step`` by :meth:`save` (``metrics=``), or None if it has none."""
        if not os.path.isdir(os.path.join(self.step_directory(step), _METRIC_SUMS)):
            return None
        restored = self.manager.restore(step, args=ocp.args.Composite(**{_METRIC_SUMS: ocp.args.StandardRestore()}))
        return restored[_METRIC_SUMS]

    def restore_latest(self, state: nnx.State) -> tuple[int, nnx.State, dict | None]:
        """``(step, state, data position)`` of the newest checkpoint; ``(0, state, None)`` if there is none.

        ``state`` gives the structure, shapes, dtypes and shardings to restore into: those of this run's mesh and
        processes, whichever wrote the checkpoint.

        Raises:
          CheckpointError: the checkpoint is unreadable or does not match ``state``.
        """
        step = self.manager.latest_step()
        if step is None:
            return 0, state, None
        rngs, saved = _split_rngs(state)
        target = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), nnx.to_pure_dict(saved)
        )
        items = {"state": ocp.args.StandardRestore(target)}
        has_position = os.path.isdir(os.path.join(self.step_directory(step), _POSITION))
        if has_position:
            items[_POSITION] = ocp.args.JsonRestore()
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(**items))
            nnx.replace_by_pure_dict(saved, restored["state"])
            position = restored[_POSITION] if has_position else self._per_process_position(step)
        except Exception as error:
            raise CheckpointError(
                f"checkpoint step {step} in {self.step_directory(step)} cannot be restored into this "
                f"run's model and optimizer: {type(error).__name__}: {error}. It is corrupt or was written by a "
                f"different model; move it out of the workdir (or use a new --workdir) to start over."
            ) from error
        return step, nnx.merge_state(rngs, saved), position

    def _per_process_position(self, step: int) -> dict | None:
        """The data position of a checkpoint of an earlier version: grain's state of each process's iterator, equal
        on every process (each read the whole global batch), so already a position in global batches."""
        files = sorted(glob.glob(os.path.join(self.step_directory(step), _PER_PROCESS_POSITION, "process_*.json")))
        if not files:
            return None
        with open(files[0]) as f:
            return json.load(f)

    def close(self) -> None:
        self.manager.close()
