"""``benchmarks.md``, its sections "Model-level scaling" (with the per-device memory against the devices splitting
the sequence) and "Relative positional bias: FFT against the dense form"."""

import math

from .common import Claim, data, scaling_gain, shown

PAGE = "benchmarks.md"


def loglog_slope(xs, ys) -> float:
    """The least-squares slope of log y against log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def scaling_slope(series: str, measure: str = "time_slope") -> float:
    return data("benchmark_scaling_cpu")["summary"][series][measure]


def per_device_mib(kind: str, devices: int) -> float:
    rows = data("benchmark_sequence_parallel_cpu")["results"]
    row = next(r for r in rows if (r["model"], r["kind"], r["devices"]) == ("decoder", kind, devices))
    return row["memory"]["peak_bytes"] / 2**20


def _devices() -> list[int]:
    return sorted({r["devices"] for r in data("benchmark_sequence_parallel_cpu")["results"]})


RELATIVE = "benchmark_relative_cpu"


def relative(length: int, case: str, measure: str = "median_ms") -> float:
    """A case (``fft``, ``dense``, ``no bias``) of the relative-bias benchmark: its median ms, or its peak MiB."""
    row = next(r for r in data(RELATIVE)["results"] if r["length"] == length)[case]
    return row["median_ms"] if measure == "median_ms" else row["memory"]["peak_bytes"] / 2**20


def _relative_lengths() -> list[int]:
    return data(RELATIVE)["config"]["lengths"]


def _fft_over_unbiased() -> list[float]:
    return [relative(n, "fft") / relative(n, "no bias") for n in _relative_lengths()]


def _l_log_l_slope() -> float:
    return loglog_slope(_relative_lengths(), [n * math.log2(n) for n in _relative_lengths()])


CLAIMS = [
    Claim(
        PAGE,
        "Fitted log-log slopes over L ≥ {}: time {:.2f} (decoder exact), {:.2f} (encoder exact) against {:.2f} "
        "(decoder positive), {:.2f} (decoder gated), {:.2f} (encoder positive); memory {} against {}.",
        lambda: (
            data("benchmark_scaling_cpu")["fit_from"],
            *(scaling_slope(s) for s in ("decoder/exact", "encoder/exact")),
            *(scaling_slope(s) for s in ("decoder/positive", "decoder/gated", "encoder/positive")),
            shown((scaling_slope(s, "memory_slope") for s in ("decoder/exact", "encoder/exact")), "{:.2f}"),
            shown(
                (scaling_slope(s, "memory_slope") for s in ("decoder/positive", "decoder/gated", "encoder/positive")),
                "{:.2f}",
            ),
        ),
    ),
    Claim(
        PAGE,
        "The kernelized step is faster from L = {} (decoder positive; {} for the gated decoder and the encoder, within "
        "noise of exact there) at these widths; at L = 8192 the decoder step is {:.0f}x faster and takes 1/{:.0f} of "
        "the memory.",
        lambda: (
            scaling_slope("decoder/positive", "faster_than_exact_from"),
            scaling_slope("decoder/gated", "faster_than_exact_from"),
            *scaling_gain(8192),
        ),
        lambda: (
            scaling_slope("decoder/gated", "faster_than_exact_from")
            == scaling_slope("encoder/positive", "faster_than_exact_from")
        ),
    ),
    Claim(
        PAGE,
        "Kernelized attention exchanges only states, so its peak falls nearly as 1/P (positive features' by {:.1f}x "
        "at P = {}); exact attention split by XLA falls too but stays at its L²/P scores.",
        lambda: (per_device_mib("positive", 1) / per_device_mib("positive", _devices()[-1]), _devices()[-1]),
        lambda: (
            all(
                per_device_mib(kind, 1) / per_device_mib(kind, p) >= 0.8 * p
                for kind in ("positive", "gated")
                for p in _devices()
            )
            and all(per_device_mib("exact", p) < per_device_mib("exact", 1) for p in _devices()[1:])
        ),
    ),
    Claim(
        PAGE,
        "Its log-log slope over {}–{} is {:.2f}; L log₂ L has slope {:.2f} over the same range, and the dense form's, "
        "up to {}, {:.2f} (L² and the gradients' extra passes). At L = 2048 the FFT path is {:.0f}x faster and needs "
        "1/{:.0f} of the memory; its memory grows linearly ({:.0f} MiB per 2048 tokens).",
        lambda: (
            _relative_lengths()[0],
            _relative_lengths()[-1],
            data(RELATIVE)["slopes"]["fft"],
            _l_log_l_slope(),
            max(r["length"] for r in data(RELATIVE)["results"] if "dense" in r),
            data(RELATIVE)["slopes"]["dense"],
            relative(2048, "dense") / relative(2048, "fft"),
            relative(2048, "dense", "peak") / relative(2048, "fft", "peak"),
            relative(2048, "fft", "peak"),
        ),
        lambda: (
            abs(data(RELATIVE)["slopes"]["fft"] - _l_log_l_slope()) < 0.1
            and max(relative(n, "fft", "peak") / n for n in _relative_lengths())
            < 1.05 * min(relative(n, "fft", "peak") / n for n in _relative_lengths())
        ),
    ),
    Claim(
        PAGE,
        "It costs {:.0f}–{:.0f}x the unbiased attention (the fft column over the no-bias column, L = {}–{}).",
        lambda: (
            min(_fft_over_unbiased()),
            max(_fft_over_unbiased()),
            _relative_lengths()[0],
            _relative_lengths()[-1],
        ),
    ),
]

SETUP = (
    "where that estimate exceeds 8 GiB",
    "the 8 host devices",
    "4 heads of 32",
    "median of 5 compiled calls",
    "for L = 1024 and 2048",
    "(F·(d_v + 1) = 64·33 here) is a length-2N real FFT",
)
