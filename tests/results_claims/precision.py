"""``precision.md``: the delta rule and kernelized attention with bfloat16 operands and a float32 state, against
float32."""

from .common import Claim, data, span

PAGE = "precision.md"
PRECISION = "benchmark_precision_cpu"


def _rows() -> list[dict]:
    return data(PRECISION)["results"]


def _ratios() -> list[float]:
    return [r["bfloat16"]["median_ms"] / r["float32"]["median_ms"] for r in _rows()]


def _percent(values) -> str:
    return span((100 * v for v in values), "{:.2f}")


DELTA_RULE, KERNELIZED = ("deltanet", "gated_deltanet", "kda"), ("kernelized", "gla")


def _decode(kinds, dtype: str) -> list[float]:
    return [r["decode_error"][dtype] for r in _rows() if r["kind"] in kinds]


CLAIMS = [
    Claim(
        PAGE,
        "bfloat16 operands bring no speed on this CPU: in this one run bfloat16's time is {}x float32's. No profile "
        "says why, and no GPU was lent to measure what bfloat16 gains there.",
        lambda: (span(_ratios(), "{:.2f}"),),
        lambda: min(_ratios()) > 0.8,
    ),
    Claim(
        PAGE,
        "The error is of the order of bfloat16's rounding: {}% of the output and {}% of the final state, at every "
        "length and kind (bfloat16 rounds to {:.2f}% at most).",
        lambda: (
            _percent(r["output_error"] for r in _rows()),
            _percent(r["state_error"] for r in _rows()),
            100 * 2**-8,
        ),
        lambda: all(r["output_error"] < 2 * 2**-8 and r["state_dtype"] == "float32" for r in _rows()),
    ),
    Claim(
        PAGE,
        "A state kept in bfloat16 drifts: decoding with the state rounded after every token is {}% off for the delta "
        "rule and {}% for kernelized attention, where the float32 state differs from the chunked run by at most "
        "{:.1e}.",
        lambda: (
            span((100 * e for e in _decode(DELTA_RULE, "bfloat16")), "{:.1f}"),
            span((100 * e for e in _decode(KERNELIZED, "bfloat16")), "{:.1f}"),
            max(r["decode_error"]["float32"] for r in _rows()),
        ),
        lambda: all(r["decode_error"]["bfloat16"] > 100 * r["decode_error"]["float32"] for r in _rows()),
    ),
    Claim(
        PAGE,
        "Kernelized attention's drifts more with the length: {}% at {} tokens, {}% at {}.",
        lambda: (
            span(
                (
                    100 * r["decode_error"]["bfloat16"]
                    for r in _rows()
                    if r["kind"] in KERNELIZED and r["length"] == _lengths()[0]
                ),
                "{:.1f}",
            ),
            _lengths()[0],
            span(
                (
                    100 * r["decode_error"]["bfloat16"]
                    for r in _rows()
                    if r["kind"] in KERNELIZED and r["length"] == _lengths()[-1]
                ),
                "{:.1f}",
            ),
            _lengths()[-1],
        ),
        lambda: all(
            a["decode_error"]["bfloat16"] < b["decode_error"]["bfloat16"]
            for a in _rows()
            for b in _rows()
            if a["kind"] == b["kind"] in KERNELIZED and a["length"] < b["length"]
        ),
    ),
]


def _lengths() -> list[int]:
    return data(PRECISION)["config"]["lengths"]


SETUP = ("[−0.001, 0]", "median of 5", "chunks of 64", "B = 1, H = 8, d = 64", "float32 for a bfloat16", "m = 64")
