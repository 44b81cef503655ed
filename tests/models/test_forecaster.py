"""The forecaster: patches of the lookback, the level it adds back, training under jit, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references
from flax import nnx
from helpers import normal

from rfa.models import ForecastConfig, Forecaster, Site

SMALL = dict(lookback=24, horizon=5, channels=2, patch_length=4, d_model=16, num_heads=2, mlp_dim=32, num_layers=1)


def test_the_forecaster_is_its_forward_in_numpy():
    """PatchTST's forward in float64 from the model's weights: each window less its mean, cut into patches of 4
    steps (both channels of a step together, step by step), embedded, plus learned positions, the pre-norm encoder
    (:func:`references.pre_norm_encoder`), the head on every token flattened, the mean added back."""
    model = Forecaster(ForecastConfig(**SMALL, positional="learned"), rngs=nnx.Rngs(0))
    model.positions.table[...] = jnp.asarray(normal(3, model.positions.table.shape))
    x = normal(1, (3, 24, 2)) + np.array([5.0, -2.0])
    level = x.mean(axis=1, keepdims=True)
    windows = x - level
    tokens = np.stack([windows[:, t : t + 4].reshape(3, -1) for t in range(0, 24, 4)], axis=1)  # [3, 6, 4 · 2]
    h = tokens @ np.asarray(model.embed.kernel[...], np.float64) + np.asarray(model.embed.bias[...], np.float64)
    h = references.pre_norm_encoder(model.encoder, h + np.asarray(model.positions.table[...], np.float64))
    head = h.reshape(3, -1) @ np.asarray(model.head.kernel[...], np.float64) + np.asarray(model.head.bias[...])
    np.testing.assert_allclose(
        jax.jit(model.__call__)(jnp.asarray(x, jnp.float32)), head.reshape(3, 5, 2) + level, atol=2e-5
    )


@pytest.mark.slow
@pytest.mark.parametrize("attention", [Site(), Site("positive", num_features=16)], ids=["exact", "positive"])
def test_a_shifted_series_gets_the_shifted_forecast(attention):
    """Each window is forecast relative to its own mean: adding c to the lookback adds c to the forecast."""
    model = Forecaster(ForecastConfig(**SMALL, attention=attention), rngs=nnx.Rngs(0))
    x = jnp.asarray(normal(0, (3, 24, 2)))
    forecast = jax.jit(lambda m, x: m(x))(model, x)
    assert forecast.shape == (3, 5, 2) and forecast.dtype == jnp.float32
    np.testing.assert_allclose(model(x + 7.5), forecast + 7.5, rtol=1e-4, atol=1e-4)
    assert float(jnp.max(jnp.abs(model(2 * x) - 2 * forecast))) > 1e-3  # but it is not linear in x


def test_tokens_are_consecutive_patches_of_steps_and_channels():
    """The embedding of token t sees steps [tP, (t+1)P) of every channel: changing one step changes one token."""
    model = Forecaster(ForecastConfig(**SMALL), rngs=nnx.Rngs(0))
    x = np.asarray(normal(1, (1, 24, 2)))
    changed = x.copy()
    changed[0, 9, 1] += 1.0  # step 9 lies in token 2 (steps 8-11)
    tokens = lambda x: (x - x.mean(1, keepdims=True)).reshape(1, 6, 8)  # noqa: E731  (what __call__ embeds)
    differs = np.abs(tokens(changed) - tokens(x)).max(-1)[0] > 0.5
    assert differs.tolist() == [False, False, True, False, False, False]
    embedded = model.embed(jnp.asarray(tokens(x)))
    assert embedded.shape == (1, 6, 16)


@pytest.mark.slow
def test_a_forecaster_trains_under_jit():
    model = Forecaster(ForecastConfig(**SMALL, attention=Site("positive", num_features=16)), rngs=nnx.Rngs(0))
    x, y = jnp.asarray(normal(2, (4, 24, 2))), jnp.asarray(normal(3, (4, 5, 2)))
    grads = nnx.jit(nnx.grad(lambda m: jnp.mean((m(x) - y) ** 2)))(model)
    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(grads)]
    assert all(np.isfinite(norms)) and float(jnp.linalg.norm(grads.head.kernel[...])) > 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"horizon": 0}, "ForecastConfig.horizon must be an integer >= 1, got 0"),
        ({"lookback": 26}, "lookback = 26 is not divisible by patch_length = 4"),
        ({"positional": "rotary"}, "positional must be 'sinusoidal' or 'learned'"),
    ],
)
def test_bad_forecast_configs_say_what_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        ForecastConfig(**{**SMALL, **fields})


def test_a_wrong_window_says_what_is_expected():
    model = Forecaster(ForecastConfig(**SMALL), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"x must have shape \[batch, lookback=24, channels=2\], got \(3, 24\)"):
        model(jnp.zeros((3, 24)))
