"""Positional encodings by value: the paper's sinusoids, T5's buckets, rotary's relativity."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import normal

from rfa.models.positional import relative_bucket, rotate, sinusoidal_table


@pytest.mark.parametrize("dim", [6, 5])
def test_sinusoidal_table_is_the_papers(dim):
    """PE(p, 2i) = sin(p / 10000^{2i/d}), PE(p, 2i+1) = cos(p / 10000^{2i/d}) (Vaswani et al. 2017, Sec. 3.5)."""
    table = sinusoidal_table(7, dim)
    for p in range(7):
        for column in range(dim):
            i = column // 2
            angle = p / 10000 ** (2 * i / dim)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert table[p, column] == pytest.approx(expected, abs=1e-6), (p, column)
    assert table[3, 0] == pytest.approx(math.sin(3.0)) and table[0, 1] == 1.0


def t5_bucket(relative_position: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's ``_relative_position_bucket`` (mesh_tensorflow), transcribed for one integer."""
    ret, n = 0, -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_buckets_are_t5s(bidirectional):
    offsets = np.arange(-300, 301)
    got = relative_bucket(jnp.asarray(offsets), num_buckets=32, max_distance=128, bidirectional=bidirectional)
    expected = [t5_bucket(int(o), bidirectional, 32, 128) for o in offsets]
    np.testing.assert_array_equal(got, expected)


def test_relative_bucket_known_values():
    """Worked by hand from T5's definition: 8 exact buckets per direction, log-spaced up to 128."""
    bucket = jax.jit(lambda o: relative_bucket(o, num_buckets=32, max_distance=128, bidirectional=True))
    offsets = jnp.array([0, -1, -7, -8, -15, -128, -1000, 1, 20])
    np.testing.assert_array_equal(bucket(offsets), [0, 1, 7, 8, 9, 15, 15, 17, 26])


def test_rotary_scores_depend_only_on_the_offset():
    """⟨R_i q, R_j k⟩ is the same for (i, j) and (i + s, j + s), and changes with i - j (Su et al., RoFormer)."""
    q, k = normal(0, (1, 1, 2, 16)), normal(1, (1, 1, 2, 16))

    def score(i, j):
        return jnp.sum(rotate(q, jnp.array([[i]])) * rotate(k, jnp.array([[j]])), axis=-1)

    for i, j in [(3, 1), (0, 5), (17, 17), (40, 2)]:
        for shift in (1, 7, 250):
            np.testing.assert_allclose(score(i + shift, j + shift), score(i, j), rtol=1e-4, atol=1e-5)
    assert float(jnp.max(jnp.abs(score(3, 1) - score(4, 1)))) > 1e-2


def test_rotary_known_values_and_norm():
    """The first pair (x_0, x_{d/2}) turns by the position itself (rate 1); rotation keeps the norm."""
    d = 8
    x = jnp.zeros((1, 1, 1, d)).at[..., 0].set(1.0)
    out = rotate(x, jnp.array([[2]]))
    expected = np.zeros(d)
    expected[0], expected[d // 2] = math.cos(2.0), math.sin(2.0)
    np.testing.assert_allclose(out[0, 0, 0], expected, atol=1e-6)
    y = normal(2, (2, 5, 3, d))
    rotated = rotate(y, jnp.broadcast_to(jnp.arange(5) * 11, (2, 5)))
    np.testing.assert_allclose(jnp.linalg.norm(rotated, axis=-1), np.linalg.norm(y, axis=-1), rtol=1e-5)
