"""The README's sentences with a number or a verdict: its summaries of the training, recall, estimator, forecasting
and benchmark results."""

from .common import (
    EIM,
    KERNELIZED,
    LISTOPS,
    PAIRS4,
    PANELS,
    PYTHON,
    README,
    SOFTMAX_KINDS,
    SORT,
    VISION,
    Claim,
    attention_ratio,
    cell,
    co2_every_kind_better,
    data,
    decoding_is_flat,
    delta,
    faster_from,
    lowest_error,
    pairs4,
    pairs4_kib,
    recall_accuracy,
    scaling_gain,
    seed_accuracies,
    span,
    spread,
    table,
    table_verdicts,
    tables,
)

PAGE = README


def _separated(key: str, word: str) -> set[str]:
    return {row["attention"] for row in table(key) if row["verdict"] == word}


README_TRAINING = [
    Claim(
        PAGE,
        "In trained models they and the other positive-feature estimators fall {} points below exact attention's "
        "accuracy on sort (worse, by the verdict rule), and positive features are not separated from it on ListOps "
        "and a character LM",
        lambda: (span((-100 * float(delta(SORT, attention=a).split(" ")[0]) for a in SOFTMAX_KINDS), "{:.1f}"),),
        lambda: (
            all(table_verdicts(SORT)[a] == "worse" for a in SOFTMAX_KINDS)
            and table_verdicts(LISTOPS)["positive"].startswith("not separated")
            and table_verdicts(PYTHON)["positive"].startswith("not separated")
        ),
    ),
    Claim(
        PAGE,
        "no kind is separated above exact attention; the positive-feature estimators of the softmax kernel (positive, "
        "iid, simplex, hyperbolic, OPRF, SADERF), elu, Linformer, trig and hybrid random features, Fourier and a "
        "sliding window of {} tokens are worse, and RFA and gated RFA are not separated",
        lambda: (cell(SORT, "m", attention="sliding_window"),),
        lambda: (
            not _separated(SORT, "better")
            and _separated(SORT, "worse")
            == {*SOFTMAX_KINDS, "elu", "linformer", "trig", "hybrid", "fourier", "sliding_window"}
            and table_verdicts(SORT)["rfa"] == table_verdicts(SORT)["gated_rfa"] == "not separated (5 seeds)"
        ),
    ),
    Claim(
        PAGE,
        "on a character LM GLA and DeltaNet are better and no other kind is separated",
        holds=lambda: _separated(PYTHON, "better") == {"gla", "deltanet"} and not _separated(PYTHON, "worse"),
    ),
    Claim(
        PAGE,
        "on ListOps at the CPU scale and on the digits no kind is separated from exact attention",
        holds=lambda: not any(_separated(key, word) for key in (LISTOPS, VISION) for word in ("better", "worse")),
    ),
]

README_OVERVIEW = [
    Claim(
        PAGE,
        "at L = 8192 kernelized attention's forward+backward is {:.1f}x faster than exact's and a decoder's training "
        "step {:.0f}x faster at 1/{:.0f} of the memory; decoding costs the same at every position.",
        lambda: (attention_ratio("exact_over_bidir", 8192), *scaling_gain(8192)),
        lambda: decoding_is_flat(),
    ),
    Claim(
        PAGE,
        "their cache is the recurrent state, so a token costs the same at any position",
        holds=lambda: decoding_is_flat(),
    ),
    Claim(
        PAGE,
        "Forecasting (3 seeds): on CO₂ every kind is better than seasonal-naive",
        holds=lambda: co2_every_kind_better(),
    ),
    Claim(
        PAGE,
        "had the lowest mean error of six, though 3 seeds do not separate it from the next; at m = 256 none came "
        "within 0.1 relative output error of softmax",
        holds=lambda: (
            {lowest_error(m, "trained")["estimator"] for m in ("encoder", "decoder", "vit", "flax")}
            <= {"oprf", "aderf"}
            and all("not separated" in line for line in tables.render(f"{EIM}:verdicts").splitlines())
            and min(lowest_error(*p)["output_error"]["mean"] for p in PANELS) > 0.1
        ),
    ),
]

README_RECALL = [
    Claim(
        PAGE,
        "the random-feature estimators of the softmax kernel (positive, OPRF, SADERF, gated RFA) reach {} at the "
        "sizes tried, m ≤ 32.",
        lambda: (span(recall_accuracy(a, m) for a in ("positive", "oprf", "saderf", "gated_rfa") for m in (4, 32)),),
    ),
    Claim(
        PAGE,
        "At 4 pairs in 64 tokens, each kind at the best of three learning rates on validation, exact attention, "
        "Taylor, DeltaNet, Gated DeltaNet and Kimi Linear's KDA/exact stack recall every query, a Gated "
        "DeltaNet/exact hybrid {}, GLA {} and elu {} "
        "(both with {} KiB of state per layer), and positive random features stay at {} up to m = 256",
        lambda: (
            f"{pairs4('hybrid_gated_deltanet')['test']['accuracy']['mean']:.3f}",
            f"{pairs4('gla')['test']['accuracy']['mean']:.3f}",
            f"{pairs4('elu')['test']['accuracy']['mean']:.3f}",
            pairs4_kib("elu"),
            span(pairs4("positive", m)["test"]["accuracy"]["mean"] for m in (16, 64, 256)),
        ),
        lambda: (
            {r["attention"] for r in data(PAIRS4) if all(run["test"]["accuracy"] == 1.0 for run in r["runs"])}
            == {"exact", "taylor", "deltanet", "gated_deltanet", "hybrid_kda"}
            and pairs4("gla")["state_bytes"] == pairs4("elu")["state_bytes"]
            and all(len(r["sweep"]) == 3 for r in data(PAIRS4))
            and all(r["sweep"][str(r["learning_rate"])] == max(r["sweep"].values()) for r in data(PAIRS4))
        ),
    ),
    Claim(
        PAGE,
        "Inside the delta rule, as its map of q and k, the same features recall {} at m = 64 and {} at m = 16, Gated "
        "DeltaNet's state, where its own map recalls every query",
        lambda: (
            spread(pairs4(KERNELIZED, 64)["test"]["accuracy"]),
            spread(pairs4(KERNELIZED, 16)["test"]["accuracy"]),
        ),
        lambda: (
            pairs4(KERNELIZED, 16)["state_bytes"] == pairs4("gated_deltanet")["state_bytes"]
            and all(accuracy == 1.0 for accuracy in seed_accuracies(pairs4("gated_deltanet")))
        ),
    ),
]

README_DECODING = [
    Claim(
        PAGE,
        "on this CPU rfa's layer is faster from position {} on, and flat to 16k",
        lambda: (faster_from(),),
    ),
]

CLAIMS = README_TRAINING + README_OVERVIEW + README_RECALL + README_DECODING

SETUP = (
    "Python ≥ 3.11",
    "`python -m rfa.experiments` is the same",
    "(0 / −inf)",
    "the lessons behind the design",
)
