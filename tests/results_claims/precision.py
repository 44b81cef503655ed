"""``precision.md``: the delta rule with bfloat16 operands and a float32 state, against float32."""

from .common import Claim, data, span

PAGE = "precision.md"
PRECISION = "benchmark_precision_cpu"


def _rows() -> list[dict]:
    return data(PRECISION)["results"]


def _ratios() -> list[float]:
    return [r["bfloat16"]["median_ms"] / r["float32"]["median_ms"] for r in _rows()]


def _percent(values) -> str:
    return span((100 * v for v in values), "{:.2f}")


CLAIMS = [
    Claim(
        PAGE,
        "bfloat16 operands bring no speed on this CPU: in this one run bfloat16's time is {}x float32's.",
        lambda: (span(_ratios(), "{:.2f}"),),
        lambda: all(0.8 < r < 1.25 for r in _ratios()),
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
        "A state kept in bfloat16 drifts: decoding with the state rounded after every token is {}% off, where the "
        "float32 state differs from the chunked run by at most {:.1e}.",
        lambda: (
            span((100 * r["decode_error"]["bfloat16"] for r in _rows()), "{:.1f}"),
            max(r["decode_error"]["float32"] for r in _rows()),
        ),
        lambda: all(r["decode_error"]["bfloat16"] > 100 * r["decode_error"]["float32"] for r in _rows()),
    ),
]

SETUP = ("[−0.001, 0]", "median of 5", "chunks of 64", "B = 1, H = 8, d = 64", "float32 for a bfloat16")
