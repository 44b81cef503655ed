"""``benchmarks.md``, its section "Pretrained families against transformers" (``rfa benchmark pretrained``)."""

from .common import Claim, data, span

PAGE = "benchmarks.md"
NAME = "benchmark_pretrained_cpu"


def _rows(**where) -> list[dict]:
    return [r for r in data(NAME)["results"] if all(r[k] == v for k, v in where.items())]


def _ratio(row: dict, what: str) -> float:
    return row["rfa"][f"{what}_tokens_per_s"] / row["transformers"][f"{what}_tokens_per_s"]


MARGIN = 1.2
"""A ratio of one run's medians orders the libraries only beyond this factor: the calls' spread is not recorded."""


def _ratios(what: str, **where) -> list[float]:
    return [_ratio(r, what) for r in _rows(**where)]


def _cases(what: str, low: float, high: float, **where) -> list[tuple]:
    return [(r["family"], r["batch"], r["prompt"]) for r in _rows(**where) if low <= _ratio(r, what) < high]


def _lowest(what: str, **where) -> dict:
    return min(_rows(**where), key=lambda r: _ratio(r, what))


def _decoding(batch: int) -> tuple:
    """The batch's decoding ratios as the page gives them: their span, the cases above the margin, the cases."""
    above = _cases("decode", MARGIN, float("inf"), batch=batch)
    return span(_ratios("decode", batch=batch), "{:.2f}"), len(above), len(_rows(batch=batch))


CLAIMS = [
    Claim(
        PAGE,
        "At batch 1 rfa's decoding throughput is {}x transformers', above 1.2x in {} of {} cases; the lowest is "
        "Qwen3's at P = {}",
        lambda: (*_decoding(1), _lowest("decode", batch=1)["prompt"]),
        lambda: _lowest("decode", batch=1)["family"] == "qwen3",
    ),
    Claim(
        PAGE,
        "At batch 8 it is {}x: above 1.2x in {} of {} cases (Qwen3.5's at both lengths, Kimi Linear's at P = 128), "
        "below 0.8x in {} (Qwen3's and Qwen3.5 MoE's at P = 1024)",
        lambda: (*_decoding(8), len(_cases("decode", 0, 1 / MARGIN, batch=8))),
        lambda: (
            set(_cases("decode", MARGIN, float("inf"), batch=8))
            == {("qwen3_5", 8, 128), ("qwen3_5", 8, 1024), ("kimi_linear", 8, 128)}
            and set(_cases("decode", 0, 1 / MARGIN, batch=8)) == {("qwen3", 8, 1024), ("qwen3_5_moe", 8, 1024)}
        ),
    ),
    Claim(
        PAGE,
        "rfa's prefill throughput is {}x transformers': below 0.8x in {} of {} cases (some of every family's but Kimi "
        "Linear's), and above 1.2x only for Kimi Linear, in its {} cases from P = 1024 or at batch 8 ({}x)",
        lambda: (
            span(_ratios("prefill"), "{:.2f}"),
            len(_cases("prefill", 0, 1 / MARGIN)),
            len(data(NAME)["results"]),
            len(_cases("prefill", MARGIN, float("inf"))),
            span(
                [_ratio(r, "prefill") for r in _rows(family="kimi_linear") if _ratio(r, "prefill") >= MARGIN], "{:.2f}"
            ),
        ),
        lambda: (
            {c[0] for c in _cases("prefill", 0, 1 / MARGIN)} == {r["family"] for r in _rows()} - {"kimi_linear"}
            and set(_cases("prefill", MARGIN, float("inf")))
            == {("kimi_linear", 1, 1024), ("kimi_linear", 1, 4096), ("kimi_linear", 8, 128), ("kimi_linear", 8, 1024)}
        ),
    ),
]

SETUP = (
    "hidden 512",
    "8 query heads of 64",
    "2 key/value heads",
    "vocabulary of 32,768",
    "8 experts of which 2 per token",
    "median of 3 calls",
    "generating 1 token and 33",
    "the 32 further tokens",
    "between 0.8x and 1.2x",
    "B · P above 8192",
)
