"""``recall.md``, its sections before the harder settings: the set-up and what the first study (4 pairs in 32 tokens)
and its 8-pair run show."""

from .common import PAIRS4, RECALL, Claim, cell, data, recall, recall_accuracy, span, spread, state_kib, sweep

PAGE = "recall.md"


_SATURATED = [("exact", None), ("elu", None), ("relu", 32), ("taylor", None), ("gla", None)]

PAIRS8 = "recall_pairs8_exact_cpu"


def _pairs8() -> dict:
    (row,) = data(PAIRS8)
    return row


CLAIMS = [
    Claim(
        PAGE,
        "Its learning-rate sweep (seed 0, validation accuracy) reads {} at 3e-4, {} at 1e-3 and {} at 3e-3, and keeps "
        "1e-3. At that rate two of the three seeds recall nearly every query (test accuracy {} and {}) and the third "
        "stays at {}:",
        lambda: (
            *sweep(_pairs8(), "0.0003", "0.001", "0.003"),
            *(f"{run['test']['accuracy']:.3f}" for run in sorted(_pairs8()["runs"], key=lambda r: r["seed"])),
        ),
        lambda: (
            _pairs8()["learning_rate"] == 1e-3
            and _pairs8()["num_pairs"] == 8
            and _pairs8()["length"] == 64
            and sorted(run["test"]["accuracy"] > 0.9 for run in _pairs8()["runs"]) == [False, True, True]
        ),
    ),
    Claim(
        PAGE,
        "Five settings recall every query on every seed (exact, elu, ReLU features at m = 32, Taylor, GLA) and "
        "Hedgehog at d' = 32 nearly every one ({} on average)",
        lambda: (f"{recall_accuracy('hedgehog', 32):.3f}",),
        lambda: (
            all(min(run["test"]["accuracy"] for run in recall(*s)["runs"]) == 1.0 for s in _SATURATED)
            and min(run["test"]["accuracy"] for run in recall("hedgehog", 32)["runs"]) < 1.0
        ),
    ),
    Claim(
        PAGE,
        "Exact attention recalls everything ({}). Its state, {} KiB at 32 tokens, grows with the length; at this "
        "length three settings hold more: gated RFA and Hedgehog at m = 32 ({} KiB) and Taylor ({} KiB).",
        lambda: (
            spread(recall("exact")["test"]["accuracy"]),
            state_kib("exact"),
            state_kib("hedgehog", 32),
            state_kib("taylor"),
        ),
        lambda: (
            sorted(
                (r["state_bytes"], r["attention"])
                for r in data(RECALL)
                if r["state_bytes"] > recall("exact")["state_bytes"]
            )
            == [(recall(a, m)["state_bytes"], a) for a, m in (("gated_rfa", 32), ("hedgehog", 32), ("taylor", None))]
        ),
    ),
    Claim(
        PAGE,
        "positive, OPRF and SADERF features reach means of {} at m = 4 and m = 32, and gated RFA {} at m = 4 and {} "
        "at m = 32.",
        lambda: (
            span(recall_accuracy(a, m) for a in ("positive", "oprf", "saderf") for m in (4, 32)),
            f"{recall_accuracy('gated_rfa', 4):.3f}",
            f"{recall_accuracy('gated_rfa', 32):.3f}",
        ),
    ),
    Claim(
        PAGE,
        "elu ({} KiB), ReLU random features at m = 32 ({} KiB), Hedgehog at d' = 32 ({} KiB) and Taylor ({} KiB) "
        "reach {}. Below that, recall tracks the state: ReLU features fall to {} at m = 4 ({} KiB) and Hedgehog to {} "
        "at d' = 4 ({} KiB).",
        lambda: (
            state_kib("elu"),
            state_kib("relu", 32),
            state_kib("hedgehog", 32),
            state_kib("taylor"),
            span(recall_accuracy(*s) for s in (("elu", None), ("relu", 32), ("hedgehog", 32), ("taylor", None))),
            f"{recall_accuracy('relu', 4):.3f}",
            state_kib("relu", 4),
            spread(recall("hedgehog", 4)["test"]["accuracy"]),
            state_kib("hedgehog", 4),
        ),
        lambda: all(
            recall(a, m)["state_bytes"] < recall(a, 32)["state_bytes"]
            and recall_accuracy(a, m) < min(recall_accuracy(*s) for s in _SATURATED if s[0] != "exact")
            for a, m in (("relu", 4), ("hedgehog", 4))
        ),
    ),
    Claim(
        PAGE,
        "GLA recalls every query ({} at elu's {} KiB)",
        lambda: (spread(recall("gla")["test"]["accuracy"]), state_kib("gla")),
        lambda: recall("gla")["state_bytes"] == recall("elu")["state_bytes"],
    ),
    Claim(
        PAGE,
        "Fourier integral attention stays near chance ({}; 16 values)",
        lambda: (spread(recall("fourier")["test"]["accuracy"]),),
    ),
    Claim(
        PAGE,
        "rfa matches that ordering at the ends (Taylor at {}, positive random features at {} and {})",
        lambda: (
            f"{recall_accuracy('taylor'):.3f}",
            f"{recall_accuracy('positive', 4):.3f}",
            f"{recall_accuracy('positive', 32):.3f}",
        ),
        lambda: recall("taylor")["state_bytes"] == max(r["state_bytes"] for r in data(RECALL)),
    ),
    Claim(
        PAGE,
        "At the harder setting below, positive features had their own learning-rate sweep and m up to 256, and "
        "stayed far below exact attention.",
        holds=lambda: all(cell(PAIRS4, "verdict", attention="positive", m=m) == "worse" for m in (16, 64, 256)),
    ),
]

SETUP = (
    '"Zoology", 2023',
    "over 32 ids (15 keys",
    "20k training sequences",
    "4 heads of 16 (Zoology's smallest model width; Based's feature dimension of 16 per head)",
    "with 100 warmup steps",
    "m = 4 and 32",
    "1000 test sequences",
    "m up to 256",
    "the 2nd-order Taylor map",
    "Zoology's Figure 2 runs 4 pairs in 64 tokens, 8 in 128 and 16 in 256, over a vocabulary of 8192, with 100k "
    "training examples for 64 epochs and a sweep of 4 learning rates per model",
    "4 pairs in 64 and in 128 tokens",
    "m = 16, 64 and 256 for positive features (Hedgehog's d' at 16 and 64, the window's w at 16, the kernelized "
    "delta rule's m at 16 and 64",
)
