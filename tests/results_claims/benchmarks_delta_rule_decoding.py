"""``benchmarks.md``, its sections "The delta rule: chunked against recurrent, GLA, KDA and exact", "Time per decoded
token" and "Decoding through the Flax layers"."""

from .common import Claim, data, decoding_is_flat, delta_ms, delta_ratio, faster_from, span

PAGE = "benchmarks.md"


DELTA_CASES = ("delta chunked", "kda chunked", "delta recurrent", "gla chunked", "gated causal", "exact")


def _delta_row(length: int) -> Claim:
    def cells() -> tuple:
        times = [delta_ms(length, case) for case in DELTA_CASES]
        ratios = (delta_ratio("gla_over_gated_causal", length), delta_ratio("kda_over_delta", length))
        return (length, *("-" if t is None else f"{t:.1f}" for t in times), *ratios)

    return Claim(PAGE, "| {} | {} | {} | {} | {} | {} | {} | {:.2f} | {:.2f} |", cells)


def _recurrent_over_chunked() -> list[float]:
    return [delta_ms(n, "delta recurrent") / delta_ms(n, "delta chunked") for n in (512, 1024, 2048)]


DELTA_CLAIMS = [
    *(_delta_row(length) for length in (512, 1024, 2048, 4096)),
    Claim(
        PAGE,
        "The chunked delta rule is {:.1f}–{:.1f}x faster than its recurrent form at 512–2048 tokens and beats exact "
        "attention from 512 tokens on ({:.0f}x at 4096).",
        lambda: (
            min(_recurrent_over_chunked()),
            max(_recurrent_over_chunked()),
            delta_ms(4096, "exact") / delta_ms(4096, "delta chunked"),
        ),
        lambda: all(delta_ms(n, "delta chunked") < delta_ms(n, "exact") for n in (512, 1024, 2048, 4096)),
    ),
    Claim(
        PAGE,
        "(`rfa.attention.chunk_scores`): {:.0f} ms at 4096 now; the code before this release, with a `[C, C, F]` "
        "tensor of relative decays per chunk, was several times slower in a timing on both cores that is not "
        "committed here. It is {:.2f}x the form with one decay per token at 4096, against a target of 2x: missed by "
        "{:.2f}x.",
        lambda: (
            delta_ms(4096, "gla chunked"),
            delta_ratio("gla_over_gated_causal", 4096),
            delta_ratio("gla_over_gated_causal", 4096) / 2,
        ),
        lambda: delta_ratio("gla_over_gated_causal", 4096) > 2,
    ),
    Claim(
        PAGE,
        "KDA's chunk is {:.2f}x Gated DeltaNet's at 4096 in this run (target 2x: met), {:.2f}x at 2048, and more at "
        "the shorter lengths ({:.2f}x at 512).",
        lambda: tuple(delta_ratio("kda_over_delta", n) for n in (4096, 2048, 512)),
        lambda: delta_ratio("kda_over_delta", 4096) <= 2 < delta_ratio("kda_over_delta", 512),
    ),
    Claim(
        PAGE,
        "A per-op profile of the two at 4096 (`tools/profile_delta_rule.py`: each op's time in a `jax.profiler` trace, "
        "summed over XLA:CPU's threads, charged to the named scope of the chunked form it lies in, backward included) "
        "puts {:.0f}% of KDA's op time in the chunk's scores, {:.0f} ms a call against Gated DeltaNet's {:.0f} ms "
        "({:.0f}% of its own): that difference is {:.0f}% of the difference in their op times.",
        lambda: (
            100 * _profile_share("kda", "chunk_scores"),
            _profile_ms("kda", "chunk_scores"),
            _profile_ms("gated_deltanet", "chunk_scores"),
            100 * _profile_share("gated_deltanet", "chunk_scores"),
            100 * _scores_part_of_difference(),
        ),
        lambda: _scores_part_of_difference() > 0.8,
    ),
    Claim(
        PAGE,
        "Among KDA's {} slowest ops, those of the scores are elementwise and layout work on `[sub-chunk, i, j, f]` "
        "arrays, none a matmul: the transposes of the diagonal sub-chunks' three-operand product ({:.0f} ms), the "
        "cumulative decays ({:.0f} ms, `cumsum`) and the masks ({:.0f} ms, `select_n`).",
        lambda: (len(_slowest_scores(None)), *(_slowest_scores(pattern) for pattern in SCORE_OPS)),
        lambda: not any("dot_general" in op["op_name"] for op in _kda_slowest() if op["part"] == "chunk_scores"),
    ),
]

PROFILE = "profile_delta_rule_cpu"


def _profile_ms(kind: str, part: str) -> float:
    return data(PROFILE)["kinds"][kind]["by_part"][part]["ms"]


def _profile_share(kind: str, part: str) -> float:
    return data(PROFILE)["kinds"][kind]["by_part"][part]["share"]


def _scores_part_of_difference() -> float:
    kinds = data(PROFILE)["kinds"]
    difference = kinds["kda"]["op_ms"] - kinds["gated_deltanet"]["op_ms"]
    return (_profile_ms("kda", "chunk_scores") - _profile_ms("gated_deltanet", "chunk_scores")) / difference


SCORE_OPS = ("aijf->...aij/transpose", "cumsum", "select_n")


def _kda_slowest() -> list[dict]:
    return data(PROFILE)["kinds"]["kda"]["slowest_ops"]


def _slowest_scores(pattern: str | None):
    """The ms of KDA's slowest ops in the scores whose name holds ``pattern`` (None: the slowest ops themselves)."""
    if pattern is None:
        return _kda_slowest()
    return sum(op["ms"] for op in _kda_slowest() if op["part"] == "chunk_scores" and pattern in op["op_name"])


STATE_LAYERS = ("deltanet", "gated_deltanet", "kda", "gla")

GATED_KINDS = ("gated_rfa", "gla", "gated_deltanet", "kda")


def _state_layer_range() -> tuple[float, float]:
    seconds = data("benchmark_flax_decoding_cpu")["seconds_per_token"]
    values = [1e6 * t for name in STATE_LAYERS for t in seconds[name].values()]
    return min(values), max(values)


def _state_layers_faster_from() -> int:
    """The first position from which every state layer is faster than Flax's cache at every longer position."""
    seconds = data("benchmark_flax_decoding_cpu")["seconds_per_token"]
    return max(
        min(
            int(p)
            for p in seconds[name]
            if all(seconds[name][q] < seconds["flax"][q] for q in seconds[name] if int(q) >= int(p))
        )
        for name in STATE_LAYERS
    )


def _checks_ratio(kind: str) -> float:
    return data("benchmark_decoding_cpu")["ratios"]["checks_over_unchecked"][kind]


def _checks_off_target(within: float = 0.10) -> list[str]:
    """The decoded kinds whose checked step differs from the unchecked one by more than ``within``."""
    ratios = data("benchmark_decoding_cpu")["ratios"]["checks_over_unchecked"]
    return [kind for kind in ratios if abs(_checks_ratio(kind) - 1) > within]


def _before(position: int) -> int:
    """The position of the Flax decoding benchmark before ``position``."""
    positions = sorted(int(p) for p in data("benchmark_flax_decoding_cpu")["seconds_per_token"]["rfa"])
    return positions[positions.index(position) - 1]


def _hybrid_growth_over_exact() -> float:
    """How much the hybrid's decoding step grows from the first position to the last, over exact attention's."""
    seconds = data("benchmark_decoding_cpu")["seconds_per_token"]
    first, last = (str(p) for p in (min(map(int, seconds["exact"])), max(map(int, seconds["exact"]))))
    return (seconds["hybrid"][last] - seconds["hybrid"][first]) / (seconds["exact"][last] - seconds["exact"][first])


DECODING = [
    Claim(
        PAGE,
        "Crossover: rfa's layer is faster than Flax's softmax cache from position {} on (between {} and {} on this "
        "CPU, with m = 256).",
        lambda: (faster_from(), _before(faster_from()), faster_from()),
        lambda: data("benchmark_flax_decoding_cpu")["rfa_faster_from_position"] == faster_from(),
    ),
    Claim(
        PAGE,
        "rfa stays flat: 16384 vs 128 is {:.2f}x (target ≤ 1.2x: met), and so do the state layers (deltanet {:.2f}x, "
        "gated_deltanet {:.2f}x, kda {:.2f}x, gla {:.2f}x).",
        lambda: (
            data("benchmark_flax_decoding_cpu")["rfa_ratio_16384_vs_128"],
            *(data("benchmark_flax_decoding_cpu")["ratios"]["last_vs_first"][name] for name in STATE_LAYERS),
        ),
        lambda: max(data("benchmark_flax_decoding_cpu")["ratios"]["last_vs_first"].values()) <= 1.2,
    ),
    Claim(
        PAGE,
        "The state layers decode a token in {:.0f}–{:.0f} µs, faster than Flax's cache from position {} on.",
        lambda: (*_state_layer_range(), _state_layers_faster_from()),
    ),
    Claim(
        PAGE,
        "checked over unchecked rfa {:.2f}, deltanet {:.2f}, gated_deltanet {:.2f}, kda {:.2f}, gla {:.2f}",
        lambda: tuple(
            data("benchmark_flax_decoding_cpu")["ratios"]["checks_over_unchecked"][n] for n in ("rfa", *STATE_LAYERS)
        ),
    ),
    Claim(
        PAGE,
        "Each gated kind is within 2x of ungated kernelized attention: GLA {:.2f}x, Gated DeltaNet {:.2f}x, "
        "KDA {:.2f}x, gated RFA {:.2f}x (its map has 2m = 128 features against positive's 64; the same map "
        "ungated takes {:.2f}x).",
        lambda: tuple(
            data("benchmark_decoding_cpu")["ratios"]["over_kernelized"][k]
            for k in ("gla", "gated_deltanet", "kda", "gated_rfa", "rfa")
        ),
        lambda: max(data("benchmark_decoding_cpu")["ratios"]["over_kernelized"][k] for k in GATED_KINDS) <= 2,
    ),
    Claim(
        PAGE,
        "Flat in position: every stateful kind's 8192 vs 128 is within 1.2x (at most {:.2f}x).",
        lambda: (max(data("benchmark_decoding_cpu")["ratios"]["last_vs_first"].values()),),
        lambda: decoding_is_flat(),
    ),
    Claim(
        PAGE,
        "timed in turns they differ by at most {:.2f}x, the noise of one run at 10–50 µs per token (target: within "
        "10%: met by every kind but {}, at {:.2f}).",
        lambda: (
            max(data("benchmark_decoding_cpu")["ratios"]["checks_over_unchecked"].values()),
            *(item for kind in _checks_off_target() for item in (kind, _checks_ratio(kind))),
        ),
        lambda: len(_checks_off_target()) == 1,
    ),
    Claim(
        PAGE,
        "The hybrid grows with its exact layer, about half as fast as exact attention.",
        holds=lambda: 0.4 < _hybrid_growth_over_exact() < 0.6,
    ),
]

PREFILL = "benchmark_prefill_cpu"


def _prefill_ratios(decay: str) -> list[float]:
    return [r[decay]["recurrent_ms"] / r[decay]["chunked_ms"] for r in data(PREFILL)["results"]]


PREFILL_CLAIMS = [
    Claim(
        PAGE,
        "Without a gradient the recurrent form is the cheaper one at every length measured on this CPU, up to {} "
        "tokens: {}x the chunked form's time with a decay per token and {}x with one per key channel, in this one run "
        "at batch 1",
        lambda: (
            data(PREFILL)["results"][-1]["length"],
            span(_prefill_ratios("token"), "{:.2f}"),
            span(_prefill_ratios("channel"), "{:.2f}"),
        ),
        lambda: max(_prefill_ratios("token") + _prefill_ratios("channel")) < 1,
    ),
]

CLAIMS = DELTA_CLAIMS + DECODING + PREFILL_CLAIMS

SETUP = (
    "chunks of 64",
    "run up to 2048",
    "c + 2 exponentials",
    "C/F + 1",
    "2m = 128 features",
    "8 heads of 32",
    "since 0.6",
    "at position 128",
    "median of 20",
    "64 by default",
)
