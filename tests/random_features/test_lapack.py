import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rfa import InputError
from rfa.random_features.lapack import per_matrix


def _symmetric(shape):
    a = jax.random.normal(jax.random.key(0), shape)
    return a @ jnp.swapaxes(a, -1, -2)


def test_per_matrix_qr_equals_the_batched_call_with_the_batch_kept():
    a = jax.random.normal(jax.random.key(1), (2, 3, 5, 5))
    q, r = jax.jit(lambda x: per_matrix(jnp.linalg.qr, x))(a)
    q_ref, r_ref = np.linalg.qr(np.asarray(a, np.float64))  # numpy's batched Householder QR, in float64
    np.testing.assert_allclose(q, q_ref, atol=1e-5)
    np.testing.assert_allclose(r, r_ref, atol=1e-4)


def test_per_matrix_eigh_returns_each_matrix_its_own_eigendecomposition():
    a = _symmetric((4, 6, 6))
    values, vectors = jax.jit(lambda x: per_matrix(jnp.linalg.eigh, x))(a)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(np.asarray(a, np.float64)), rtol=1e-4, atol=1e-4)
    rebuilt = (vectors * values[..., None, :]) @ jnp.swapaxes(vectors, -1, -2)
    np.testing.assert_allclose(rebuilt, a, rtol=1e-4, atol=1e-3)


def test_per_matrix_of_one_matrix_is_the_decomposition_itself():
    a = _symmetric((5, 5))
    np.testing.assert_array_equal(per_matrix(jnp.linalg.eigh, a)[0], jnp.linalg.eigh(a)[0])


def test_per_matrix_refuses_a_vector():
    with pytest.raises(InputError, match=r"\[batch..., n, n\], got shape \(5,\)"):
        per_matrix(jnp.linalg.qr, jnp.ones(5))
