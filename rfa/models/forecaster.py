"""A Transformer forecaster: an encoder over a lookback window, a linear head for the next H steps.

The lookback ``x [batch, L, C]`` is cut into patches of ``P`` steps (PatchTST: Nie et al., "A Time Series
is Worth 64 Words", ICLR 2023; ``P = 1`` makes every step a token), each linearly embedded, plus
positions; the encoder stack (the attention chosen by ``attention``: exact or kernelized) reads the
``L / P`` tokens, and a linear head on all of them, flattened, gives the ``H × C`` forecast. Each window
is centred on its own mean before the encoder and the mean is added back to the forecast (the
location part of reversible instance normalisation, Kim et al., ICLR 2022), so a trending series is
forecast relative to its recent level.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import at_least_float32
from rfa._validation import InputError
from rfa.checks import raise_if
from rfa.layers.positional import PositionalEmbedding
from rfa.models.config import EncoderConfig
from rfa.models.site import Site
from rfa.models.transformer import EncoderStack

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class ForecastConfig:
    """The forecaster's window, patches, widths and attention.

    Attributes:
      lookback: L, the steps the model reads; divisible by ``patch_length``.
      horizon: H >= 1, the steps it forecasts.
      channels: C, the series' variables.
      patch_length: P, steps per token.
      d_model, num_heads, mlp_dim, num_layers, dropout_rate: the encoder.
      positional: ``"sinusoidal"`` or ``"learned"`` positions of the tokens.
      attention: the encoder's self-attention (exact or any kernelized kind).

    Example:
      >>> ForecastConfig(lookback=96, horizon=12, patch_length=4).num_tokens
      24
    """

    lookback: int
    horizon: int
    channels: int = 1
    patch_length: int = 1
    d_model: int = 64
    num_heads: int = 4
    mlp_dim: int = 128
    num_layers: int = 2
    dropout_rate: float = 0.0
    positional: str = "sinusoidal"
    attention: Site = dataclasses.field(default_factory=Site)

    def __post_init__(self):
        for name in ("lookback", "horizon", "channels", "patch_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"ForecastConfig.{name} must be an integer >= 1, got {value!r}.")
        if self.lookback % self.patch_length:
            raise InputError(
                f"lookback = {self.lookback} is not divisible by patch_length = {self.patch_length}: the patches must "
                "tile the lookback window."
            )
        if self.positional not in ("sinusoidal", "learned"):
            raise InputError(f"ForecastConfig.positional must be 'sinusoidal' or 'learned', got {self.positional!r}.")
        self.encoder_config()

    @property
    def num_tokens(self) -> int:
        return self.lookback // self.patch_length

    def encoder_config(self) -> EncoderConfig:
        """The encoder stack's config (pre-norm, GELU; patches are embedded, not looked up)."""
        return EncoderConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            mlp_dim=self.mlp_dim,
            num_encoder_layers=self.num_layers,
            dropout_rate=self.dropout_rate,
            activation="gelu",
            norm="pre",
            max_length=self.num_tokens,
            encoder_attention=self.attention,
        )


class Forecaster(nnx.Module):
    """``x [batch, lookback, channels]`` → forecast ``[batch, horizon, channels]`` (at least float32).

    Input holding NaN or inf is refused (a ValueError; under ``jit`` when the compiled call runs).

    Example:
      >>> config = ForecastConfig(lookback=32, horizon=4, patch_length=4, attention=Site("positive", num_features=16))
      >>> model = Forecaster(config, rngs=nnx.Rngs(0))
      >>> nnx.jit(Forecaster.__call__)(model, jnp.zeros((2, 32, 1))).shape  # model(series), compiled
      (2, 4, 1)
    """

    def __init__(self, config: ForecastConfig, *, rngs: nnx.Rngs):
        self.config = config
        c = config
        self.embed = nnx.Linear(c.patch_length * c.channels, c.d_model, rngs=rngs)
        self.positions = PositionalEmbedding(c.num_tokens, c.d_model, kind=c.positional, rngs=rngs)
        self.dropout = nnx.Dropout(c.dropout_rate, rngs=rngs)
        self.encoder = EncoderStack(c.encoder_config(), rngs=rngs)
        self.head = nnx.Linear(c.num_tokens * c.d_model, c.horizon * c.channels, rngs=rngs)

    def __call__(self, x: Array) -> Array:
        c = self.config
        if getattr(x, "ndim", None) != 3 or tuple(x.shape[1:]) != (c.lookback, c.channels):
            raise InputError(
                f"x must have shape [batch, lookback={c.lookback}, channels={c.channels}], got "
                f"{tuple(getattr(x, 'shape', ()))}."
            )
        raise_if(
            ~jnp.all(jnp.isfinite(x)),
            "x holds NaN or inf: the forecaster refuses series with missing values (a NaN in one window makes its "
            "whole forecast NaN); fill or drop them first (rfa.data.series.Windows names the first one's time step).",
        )
        level = jnp.mean(x, axis=1, keepdims=True)  # each window's own level, added back to its forecast
        tokens = (x - level).reshape(x.shape[0], c.num_tokens, c.patch_length * c.channels)
        h = self.dropout(self.embed(tokens) + self.positions())
        batch, length = h.shape[:2]
        positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
        h = self.encoder(h, key_mask=jnp.ones((batch, length), bool), positions=positions)
        forecast = self.head(h.reshape(batch, -1)).reshape(batch, c.horizon, c.channels)
        return at_least_float32(forecast + level)
