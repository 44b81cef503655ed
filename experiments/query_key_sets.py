"""The query and key sets of the ``estimator_fit`` experiment: synthetic anisotropic ones, and those of a
trained model's attention layer.

Each set is ``(q, k)``, float32 ``[heads, n, d]``, scaled as kernelized attention scales them
(``d^{-1/4}`` each, so ``qᵀk`` is the softmax logit). Likhosherstov et al., "Dense-Exponential Random
Features", arXiv 2302.00787, fit DERF to the statistics of the queries and keys they will see; their
gain over OPRF needs queries and keys of different covariances.
"""

from __future__ import annotations

import importlib.util
import os

import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from experiments.sweep import group_seed
from rfa.models import QueriesKeys


def anisotropic(config: ml_collections.ConfigDict) -> tuple[np.ndarray, np.ndarray]:
    """One head of n queries and n keys with Gaussian entries of different covariances.

    Standard deviations fall geometrically from ``input_scale`` to ``input_scale / anisotropy``
    along the axes of a random rotation, in the opposite order for the keys (rotated again), and the
    keys have a mean; so the two second moments differ, which is where DERF gains over OPRF.
    """
    rng = np.random.default_rng(group_seed(config.seed, ("anisotropic",)))
    d, n = config.dim, config.num_vectors
    scales = config.input_scale * config.anisotropy ** -np.linspace(0.0, 1.0, d)
    rotations = [np.linalg.qr(rng.standard_normal((d, d)))[0] for _ in range(2)]
    q = (rng.standard_normal((n, d)) * scales) @ rotations[0].T
    k = (rng.standard_normal((n, d)) * scales[::-1]) @ rotations[1].T + 0.3 * config.input_scale
    return q[None].astype(np.float32), k[None].astype(np.float32)


def _load_config(spec: str) -> ml_collections.ConfigDict:
    """``path/to/config.py:arg`` → its ``get_config(arg)``."""
    path, _, arg = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("model_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg or None)


def trained_model(config: ml_collections.ConfigDict, workdir: str) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the queries and keys of encoder layer ``config.model.layer`` on evaluation inputs.

    The model of ``config.model.config`` is trained for ``config.model.num_train_steps`` steps into
    ``<workdir>/model`` (resumed there like any training run), then its self-attention projections
    are read on the first evaluation batch, padding left out; up to ``num_vectors`` tokens per head.
    """
    from rfa.tasks import eval_batches
    from rfa.train import load_model, train_and_evaluate

    train_config = _load_config(config.model.config)
    train_config.num_train_steps = config.model.num_train_steps
    train_config.data_dir = config.data_dir
    model_dir = os.path.join(workdir, "model")
    train_and_evaluate(train_config, model_dir)
    model, train_config, task, _ = load_model(model_dir)
    batch = next(iter(eval_batches(task, data_dir=config.data_dir, batch_size=train_config.batch_size,
                                   max_length=train_config.max_length, max_batches=1)))  # fmt: skip
    source = jnp.asarray(batch["inputs"])
    keep = np.asarray(source != model.config.pad_id)
    encode = (lambda m, x: m.encode(x)) if hasattr(model, "encode") else (lambda m, x: m(x))
    _, sown = nnx.capture(encode, QueriesKeys)(model, source)  # the encoder's pass over the batch
    q, k, _ = sown["encoder"]["layers"][config.model.layer]["attention"]["queries_keys"][0]
    q, k = (np.asarray(x, np.float32)[keep] for x in (q, k))  # [tokens, heads, d]
    q, k = (np.swapaxes(x[: config.num_vectors], 0, 1) * x.shape[-1] ** -0.25 for x in (q, k))
    return q.astype(np.float32), k.astype(np.float32)


class QueryKeySets:
    """The sets of a run, made once and shared by every estimator's cells."""

    def __init__(self, config: ml_collections.ConfigDict, workdir: str):
        self.config, self.workdir, self._cache = config, workdir, {}

    def __call__(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._cache:
            self._cache[name] = (
                anisotropic(self.config) if name == "anisotropic" else trained_model(self.config, self.workdir)
            )
        return self._cache[name]


def fitted_params(fm, params: dict, q: np.ndarray, k: np.ndarray) -> dict:
    """The estimator's parameters for one head's set: the config's, else its fit to the set (without the
    length axis), else none."""
    if params or fm.fit is None:
        return dict(params)
    fitted = fm.fit(jnp.asarray(q), jnp.asarray(k))
    return {name: np.squeeze(np.asarray(value), axis=value.ndim - 1 - fm.event_ndim(name))
            for name, value in fitted.items()}  # fmt: skip
