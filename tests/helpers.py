"""Shared helpers for the test suite (``tests/`` is on pytest's pythonpath)."""

import jax
import numpy as np


def normal(seed: int, shape, scale: float = 1.0, dtype=np.float32):
    """A reproducible standard-normal array (NumPy RNG, independent of JAX's)."""
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def monte_carlo(estimate, num_draws: int, seed: int = 0, batch: int = 5000):
    """Evaluates ``estimate(key)`` for ``num_draws`` independent keys, jitted and vmapped in batches."""
    keys = jax.random.split(jax.random.key(seed), num_draws)
    fn = jax.jit(jax.vmap(estimate))
    return np.concatenate([np.asarray(fn(keys[i : i + batch]), np.float64) for i in range(0, num_draws, batch)])
