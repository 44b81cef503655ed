"""Batched matrix decompositions that cannot deadlock XLA's CPU thread pool.

On CPU, ``jnp.linalg.qr`` and ``jnp.linalg.eigh`` of a batch of matrices lower to one jaxlib LAPACK call (jaxlib
0.10) that queues pieces of its batch on XLA's intra-op thread pool and blocks its thread until they are done.
XLA runs independent operations of one program at once on that same pool, so when as many such calls run as the
pool has threads (two orthogonal projections drawn in one jitted step, two fits, on a 2-core machine), every
thread blocks on pieces that no thread is left to run, and the program never returns. A call with a single
matrix runs inline on its calling thread and queues nothing, so on CPU :func:`per_matrix` decomposes the batch one
matrix at a time (``lax.map``); on other backends it keeps the one batched call. Under ``jax.vmap`` the map's body
is batched again into one call per step: the guard holds for the batches rfa forms itself, not for a vmap around
it. The delta rule's triangular solve avoids LAPACK altogether for the same reason
(``rfa.attention.delta_rule.chunked.solve_unit_lower``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
from jax import Array

from rfa._validation import InputError


def per_matrix(decomposition: Callable, matrices: Array):
    """``decomposition`` of every matrix of ``matrices`` ``[batch..., n, n]``: on CPU one matrix per LAPACK call,
    elsewhere one batched call; the outputs keep the batch dimensions.

    Args:
      decomposition: a function of one ``[n, n]`` matrix that also takes a batch, e.g. ``jnp.linalg.qr``; it may
        return a pytree of arrays (``jnp.linalg.eigh``'s eigenvalues and eigenvectors).
      matrices: ``[batch..., n, n]``.

    Example:
      >>> q, r = per_matrix(jnp.linalg.qr, jax.random.normal(jax.random.key(0), (2, 3, 4, 4)))
      >>> q.shape, r.shape
      ((2, 3, 4, 4), (2, 3, 4, 4))
    """
    if matrices.ndim < 2:
        raise InputError(f"matrices must be [batch..., n, n], got shape {matrices.shape}.")
    if matrices.ndim == 2:
        return decomposition(matrices)
    batch = matrices.shape[:-2]
    flat = matrices.reshape((-1, *matrices.shape[-2:]))
    out = jax.lax.platform_dependent(flat, cpu=lambda x: jax.lax.map(decomposition, x), default=decomposition)
    return jax.tree.map(lambda a: a.reshape(batch + a.shape[1:]), out)
