"""Multi-query associative recall (MQAR): key-value pairs, then queries that repeat the keys.

Arora, Eyuboglu, Timalsina, Johnson, Poli, Zou, Rudra, Ré, "Zoology: Measuring and Improving Recall in
Efficient Language Models", 2023, Sec. 3; used by Arora et al., "Simple linear attention language models
balance the recall-throughput tradeoff" (Based), ICML 2024, to compare feature maps against state size.

An example of length L with N pairs over a vocabulary of V ids (id 0 is padding, never used):

- positions ``0 … 2N−1`` hold ``k_1 v_1 … k_N v_N``: N distinct keys from ``[1, 1 + K)`` and N distinct values
  from ``[1 + K, V)``, ``K = (V − 1) // 2`` (keys and values come from disjoint halves);
- the remaining ``L − 2N`` positions form ``(L − 2N) // 2`` slots of two tokens. Each key is queried once, in a
  slot drawn without replacement with probability ∝ ``g^(a − 1)`` for slot ``g = 1, 2, …`` (``power_a = a``;
  small ``a`` puts most queries soon after the context, with a long tail); a queried slot holds the key and then
  its value. Every other position holds a random id (Zoology's ``random_non_queries``).
- ``targets`` is the value at each query position (the next token a causal model must predict) and 0 elsewhere,
  so accuracy counts query positions only.

So ``4N ≤ L`` (N slots after the context) and ``N ≤ K`` (distinct keys, and as many distinct values). The
sizes are a :class:`MqarConfig`, which a training config sets (``config.recall``, ``config.max_length``); each
sizes' data is prepared under its own name (``mqar/v256_p8_l64_n20000_e1000_a0.01``). Everything derives
from fixed seeds.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import tensorflow_datasets as tfds

from rfa.data.generated import GeneratedBuilder, GeneratedConfig
from rfa.workdir import ConfigError


@dataclasses.dataclass
class MqarConfig(GeneratedConfig):
    """Vocabulary, pairs, length, the query-gap exponent and split sizes (make one with :func:`mqar_config`)."""

    vocab_size: int = 256
    num_pairs: int = 8
    length: int = 64
    power_a: float = 0.01


def check_sizes(vocab_size: int, num_pairs: int, length: int) -> None:
    """A ``ConfigError`` naming the fields when MQAR cannot be built at these sizes.

    Example:
      >>> check_sizes(vocab_size=16, num_pairs=8, length=64)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      rfa.workdir.ConfigError: config.recall.vocab_size = 16 leaves 7 keys ... use a vocabulary of at least 17.
    """
    if num_pairs < 1:
        raise ConfigError(f"config.recall.num_pairs must be at least 1, got {num_pairs}.")
    keys = (vocab_size - 1) // 2
    if num_pairs > keys:
        raise ConfigError(
            f"config.recall.vocab_size = {vocab_size} leaves {keys} keys (ids 1 to {keys}; values take the other "
            f"half) for config.recall.num_pairs = {num_pairs} distinct keys: use a vocabulary of at least "
            f"{2 * num_pairs + 1}."
        )
    if 4 * num_pairs > length:
        raise ConfigError(
            f"config.recall.num_pairs = {num_pairs} pairs need a length of at least 4 x {num_pairs} = {4 * num_pairs} "
            f"(the pairs, then a query and its value for each), but config.max_length = {length}: lengthen the "
            f"sequence or use at most {length // 4} pairs."
        )


def mqar_config(
    vocab_size: int,
    num_pairs: int,
    length: int,
    *,
    num_train: int = 20_000,
    num_eval: int = 1_000,
    power_a: float = 0.01,
) -> MqarConfig:
    """The builder config of these sizes, named by them, after :func:`check_sizes`.

    Example:
      >>> mqar_config(256, 8, 64).name
      'v256_p8_l64_n20000_e1000_a0.01'
    """
    check_sizes(vocab_size, num_pairs, length)
    name = f"v{vocab_size}_p{num_pairs}_l{length}_n{num_train}_e{num_eval}_a{power_a:g}"
    return MqarConfig(
        name=name,
        vocab_size=vocab_size,
        num_pairs=num_pairs,
        length=length,
        num_train=num_train,
        num_eval=num_eval,
        power_a=power_a,
        description="MQAR at these sizes",
    )


def example(rng: np.random.Generator, config: MqarConfig) -> dict[str, np.ndarray]:
    """One example: ``inputs`` and ``targets``, both ``int32 [length]`` (see the module)."""
    n, length = config.num_pairs, config.length
    keys_available = (config.vocab_size - 1) // 2
    keys = 1 + rng.choice(keys_available, n, replace=False)
    values = 1 + keys_available + rng.choice(config.vocab_size - 1 - keys_available, n, replace=False)
    inputs = rng.integers(1, config.vocab_size, length).astype(np.int32)
    inputs[0 : 2 * n : 2], inputs[1 : 2 * n : 2] = keys, values
    slots = (length - 2 * n) // 2
    weights = config.power_a * np.arange(1, slots + 1, dtype=np.float64) ** (config.power_a - 1)
    chosen = rng.choice(slots, n, replace=False, p=weights / weights.sum())
    queries = 2 * n + 2 * chosen
    inputs[queries], inputs[queries + 1] = keys, values
    targets = np.zeros(length, np.int32)
    targets[queries] = values
    return {"inputs": inputs, "targets": targets}


class Mqar(GeneratedBuilder):
    """``tfds.builder("mqar", config=mqar_config(V, N, L))``: splits train/validation/test, seeded by sizes and
    split. No config is registered: every one is made from the sizes of a training config."""

    def _info(self) -> tfds.core.DatasetInfo:
        length = self.builder_config.length
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "inputs": tfds.features.Tensor(shape=(length,), dtype=np.int32),
                    "targets": tfds.features.Tensor(shape=(length,), dtype=np.int32),
                }
            ),
        )

    def _generate_examples(self, split: str, count: int):
        rng = np.random.default_rng([zlib.crc32(self.builder_config.name.encode()), zlib.crc32(split.encode())])
        for index in range(count):
            yield index, example(rng, self.builder_config)
