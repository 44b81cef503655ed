"""Checkpoints with orbax: model and optimizer state, the data iterator's position and the step.

One ``ocp.CheckpointManager`` directory per workdir (``<workdir>/checkpoints/<step>``), each
step holding ``state`` (``nnx.to_pure_dict`` of the model and optimizer state without RNG
streams: dropout keys are derived from the step), ``data`` (the grain iterator state) and, for a
run stopped between two logs, ``metric_sums`` (the training-metric sums of the steps since the
last log, so that the resumed run logs the same averages). Orbax writes each step to a temporary
directory and renames it when complete, so a killed run leaves only whole checkpoints; a
preservation policy keeps the latest ``keep`` steps (and every ``keep_every``-th step, if set).
"""

from __future__ import annotations

import os

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

_METRIC_SUMS = "metric_sums"  # not "metrics": CheckpointManager reserves that item for its own JSON


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be restored into this run's model (corrupt, or from another model)."""


def _split_rngs(state: nnx.State) -> tuple[nnx.State, nnx.State]:
    return nnx.split_state(state, nnx.RngState, ...)


class Checkpoints:
    """Saves and restores ``(state, data iterator)`` of a training run.

    Example:
      >>> import tempfile, grain
      >>> state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
      >>> iterator = iter(grain.MapDataset.range(10).to_iter_dataset())
      >>> checkpoints = Checkpoints(tempfile.mkdtemp(), keep=2)
      >>> checkpoints.restore_latest(state, iterator)[0]  # (0, state) when there is none
      0
      >>> _ = next(iterator), checkpoints.save(1, state, iterator)
      >>> step, state = checkpoints.restore_latest(state, iterator)
      >>> step, next(iterator)  # the data position is restored too
      (1, 1)
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

    def save(
        self, step: int, state: nnx.State, iterator: grain.DatasetIterator, *, metrics: dict | None = None
    ) -> None:
        """Saves ``state`` and the position of ``iterator`` as step ``step``.

        Args:
          step: the number of completed training steps.
          state: the model and optimizer state (RNG streams are left out).
          iterator: the training data iterator, positioned at the next batch.
          metrics: metric sums not yet logged (a run stopped between two logs), or None.
        """
        _, saved = _split_rngs(state)
        items = {
            "state": ocp.args.StandardSave(nnx.to_pure_dict(saved)),
            "data": grain.checkpoint.CheckpointSave(iterator),
        }
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

    def restore_latest(self, state: nnx.State, iterator: grain.DatasetIterator | None = None) -> tuple[int, nnx.State]:
        """``(step, state)`` of the newest checkpoint, with ``iterator`` moved to its position; ``(0, state)`` if none.

        ``state`` gives the structure, shapes, dtypes and shardings to restore into; without
        ``iterator`` only the state is read (inference).

        Raises:
          CheckpointError: the checkpoint is unreadable or does not match ``state``.
        """
        step = self.manager.latest_step()
        if step is None:
            return 0, state
        rngs, saved = _split_rngs(state)
        target = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), nnx.to_pure_dict(saved)
        )
        items = {"state": ocp.args.StandardRestore(target)}
        if iterator is not None:
            items["data"] = grain.checkpoint.CheckpointRestore(iterator)
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(**items))
            nnx.replace_by_pure_dict(saved, restored["state"])
        except Exception as error:
            raise CheckpointError(
                f"checkpoint step {step} in {self.step_directory(step)} cannot be restored into this "
                f"run's model and optimizer: {type(error).__name__}: {error}. It is corrupt, was written by a "
                f"different model, or by a run with another number of processes (the data position is saved per "
                f"process); move it out of the workdir (or use a new --workdir) to start over."
            ) from error
        return step, nnx.merge_state(rngs, saved)

    def close(self) -> None:
        self.manager.close()
