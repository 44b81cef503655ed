"""Positional encodings by value: the paper's sinusoids, T5's buckets, rotary's relativity."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import normal

from rfa.layers.positional import PositionalEmbedding, relative_bucket, rotate, sinusoidal_table
from rfa.models import AttentionInputs, Encoder, EncoderConfig, preset
from rfa.models.blocks import attention_site


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


def test_one_position_table_serves_sequences_grids_and_class_tokens():
    """Sinusoids along a sequence are the paper's table; on a grid each cell's row and column; a leading class
    position is 0 when fixed and trained like the others when learned."""
    sequence = PositionalEmbedding(6, 8, kind="sinusoidal")
    np.testing.assert_array_equal(sequence(), sinusoidal_table(6, 8))
    np.testing.assert_array_equal(sequence(jnp.array([[4, 1]])), sinusoidal_table(6, 8)[[[4, 1]]])
    grid = PositionalEmbedding(0, 8, kind="sinusoidal", grid=(2, 3), leading=1)()
    np.testing.assert_array_equal(grid[0], np.zeros(8))
    np.testing.assert_array_equal(grid[1 + 3 * 1 + 2, :4], sinusoidal_table(2, 4)[1])  # row 1, column 2
    np.testing.assert_array_equal(grid[1 + 3 * 1 + 2, 4:], sinusoidal_table(3, 4)[2])
    learned = PositionalEmbedding(0, 8, kind="learned", grid=(2, 3), leading=1, rngs=nnx.Rngs(0))
    assert isinstance(learned.table, nnx.Param) and learned().shape == (7, 8)
    assert float(jnp.std(learned())) == pytest.approx(0.02, rel=0.5)
    with pytest.raises(ValueError, match="needs rngs"):
        PositionalEmbedding(4, 8, kind="learned")
    with pytest.raises(ValueError, match="must be one of"):
        PositionalEmbedding(4, 8, kind="rotary")


def test_an_encoder_config_has_no_vocabulary_and_builds_an_attention_site():
    config = EncoderConfig(d_model=16, num_heads=2, mlp_dim=32, num_encoder_layers=1)
    assert not hasattr(config, "vocab_size") and config.head_dim == 8
    site = attention_site(config, config.encoder_attention, causal=False, cross=False, rngs=nnx.Rngs(0))
    x = jnp.ones((2, 3, 16))
    positions = jnp.broadcast_to(jnp.arange(3), (2, 3))
    assert site(x, key_mask=jnp.ones((2, 3), bool), q_positions=positions, k_positions=positions).shape == x.shape
    with pytest.raises(ValueError, match=r"EncoderConfig\.d_model must be an int >= 1"):
        EncoderConfig(d_model=0)


def test_queries_and_keys_are_captured_only_inside_nnx_capture():
    """The sown (q, k, key_mask) are the site's own projections; outside a capture nothing stays on the module."""
    model = Encoder(preset("tiny", vocab_size=50, positional="learned"), rngs=nnx.Rngs(0))
    tokens = jnp.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    before = nnx.state(model)
    model(tokens)
    assert jax.tree.structure(nnx.state(model)) == jax.tree.structure(before)
    _, sown = nnx.capture(model, AttentionInputs)(tokens)
    q, k, _, key_mask = sown["encoder"]["layers"][1]["attention"]["inputs"][0]
    np.testing.assert_array_equal(key_mask, tokens != 0)
    layer0 = model.encoder.layers[0]
    x = layer0(
        model.embed(tokens, jnp.broadcast_to(jnp.arange(4), (2, 4))),
        key_mask=tokens != 0,
        positions=jnp.broadcast_to(jnp.arange(4), (2, 4)),
    )
    np.testing.assert_allclose(q, model.encoder.layers[1].attention.query(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(k, model.encoder.layers[1].attention.key(x), rtol=1e-5, atol=1e-6)
