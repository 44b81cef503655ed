"""``recall.md``, its sections "4 pairs in 64 tokens over 128 ids" and "The kernelized delta rule"."""

import math

from .common import (
    KERNELIZED,
    PAIRS4,
    Claim,
    cell,
    data,
    delta,
    hedgehog_recalls_on_one_seed,
    pairs4,
    pairs4_kib,
    recall_accuracy,
    seed_accuracies,
    seed_cells,
    span,
    spread,
    state_kib,
    sweep,
    table_verdicts,
)

PAGE = "recall.md"


PROBE = "recall_pairs4_l64_probe_cpu"  # positive features at m = 64 and a learning rate of 3e-2, one seed

_RECALL_ALL = ("exact", "deltanet", "gated_deltanet")


def _hedgehog_seeds(m: int) -> tuple[str, ...]:
    return tuple(
        f"{run['test']['accuracy']:.3f}" for run in sorted(pairs4("hedgehog", m)["runs"], key=lambda r: r["seed"])
    )


CLAIMS = [
    Claim(
        PAGE,
        "At Gated DeltaNet's state, {} KiB per layer (m = 16 positive features: keys of 16, as the SiLU map's), the "
        "kernelized rule recalls {}, lower than Gated DeltaNet's {} on every seed ({}, {} and {}); three seeds do not "
        "separate it from exact attention ({}).",
        lambda: (
            pairs4_kib("gated_deltanet"),
            spread(pairs4(KERNELIZED, 16)["test"]["accuracy"]),
            spread(pairs4("gated_deltanet")["test"]["accuracy"]),
            *seed_cells(pairs4(KERNELIZED, 16)),
            delta(PAIRS4, attention=KERNELIZED, m=16),
        ),
        lambda: (
            pairs4(KERNELIZED, 16)["state_bytes"] == pairs4("gated_deltanet")["state_bytes"]
            and all(
                a < b
                for a, b in zip(
                    seed_accuracies(pairs4(KERNELIZED, 16)), seed_accuracies(pairs4("gated_deltanet")), strict=True
                )
            )
            and cell(PAIRS4, "verdict", attention=KERNELIZED, m=16) == "not separated (3 seeds)"
        ),
    ),
    Claim(
        PAGE,
        "With m = 64 ({} KiB, about three times the state) it recalls {}, missing at most one query in a thousand on "
        "a seed.",
        lambda: (state_kib(KERNELIZED, 64, PAIRS4), spread(pairs4(KERNELIZED, 64)["test"]["accuracy"])),
        lambda: (
            2.5 < pairs4(KERNELIZED, 64)["state_bytes"] / pairs4("gated_deltanet")["state_bytes"] < 3.5
            and min(seed_accuracies(pairs4(KERNELIZED, 64))) >= 0.999
        ),
    ),
    Claim(
        PAGE,
        "elu's map inside the delta rule, at the same {} KiB, recalls {}: two seeds recall nearly every query "
        "({} and {} to three decimals), the third {}.",
        lambda: (
            pairs4_kib("gated_deltanet_elu"),
            spread(pairs4("gated_deltanet_elu")["test"]["accuracy"]),
            *seed_cells(pairs4("gated_deltanet_elu")),
        ),
        lambda: (
            pairs4("gated_deltanet_elu")["state_bytes"] == pairs4("gated_deltanet")["state_bytes"]
            and sorted(seed_accuracies(pairs4("gated_deltanet_elu")))[1] > 0.99
        ),
    ),
    Claim(
        PAGE,
        "The delta rule is what carries the estimator: positive random features in linear attention stay at {} "
        "(m = 16) and {} (m = 64) on this task (above), where inside the delta rule the same features reach {} and {}.",
        lambda: (
            spread(pairs4("positive", 16)["test"]["accuracy"]),
            spread(pairs4("positive", 64)["test"]["accuracy"]),
            spread(pairs4(KERNELIZED, 16)["test"]["accuracy"]),
            spread(pairs4(KERNELIZED, 64)["test"]["accuracy"]),
        ),
        lambda: all(
            max(seed_accuracies(pairs4("positive", m))) < min(seed_accuracies(pairs4(KERNELIZED, m))) for m in (16, 64)
        ),
    ),
    Claim(
        PAGE,
        "Both maps kept the top rate of the grid, 1e-2 (positive features, swept at m = 64: validation accuracy {} at "
        "1e-3, {} at 3e-3 and {} at 1e-2; elu: {}, {} and {}); no larger rate was tried.",
        lambda: (
            *sweep(pairs4(KERNELIZED, 64), "0.001", "0.003", "0.01"),
            *sweep(pairs4("gated_deltanet_elu"), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            pairs4(KERNELIZED, 16)["learning_rate"] == pairs4(KERNELIZED, 64)["learning_rate"] == 1e-2
            and pairs4(KERNELIZED, 16)["swept_at"] == 64
            and pairs4("gated_deltanet_elu")["learning_rate"] == 1e-2
        ),
    ),
    Claim(
        PAGE,
        "Kimi Linear's stack, three KDA layers to one exact in 4 layers (twice the others' depth), recalls every query "
        "on every seed ({}) with {} KiB per layer on average. Every rate of its sweep but the last reached validation "
        "accuracy 1.000 ({} at 1e-3, {} at 3e-3 and {} at 1e-2), so it kept the first.",
        lambda: (
            spread(pairs4("hybrid_kda")["test"]["accuracy"]),
            pairs4_kib("hybrid_kda"),
            *sweep(pairs4("hybrid_kda"), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            all(run["test"]["accuracy"] == 1.0 for run in pairs4("hybrid_kda")["runs"])
            and table_verdicts(PAIRS4)["hybrid_kda"] == "not separated (3 seeds)"
            and pairs4("hybrid_kda")["learning_rate"] == 1e-3
            and pairs4("hybrid_kda")["sweep"]["0.01"] < 1.0 == pairs4("hybrid_kda")["sweep"]["0.001"]
        ),
    ),
    Claim(
        PAGE,
        "KDA, the delta rule with one decay per key channel (Kimi Linear's layer), recalls {} with Gated DeltaNet's {} "
        "KiB. It misses a few queries on every seed ({}, {} and {}); its difference from exact attention ({}) is not "
        "separated. Its learning rate is the top of the grid (validation accuracy {} at 1e-3, {} at 3e-3 and {} at "
        "1e-2), and no larger rate was tried.",
        lambda: (
            spread(pairs4("kda")["test"]["accuracy"]),
            pairs4_kib("gated_deltanet"),
            *(f"{run['test']['accuracy']:.3f}" for run in sorted(pairs4("kda")["runs"], key=lambda r: r["seed"])),
            delta(PAIRS4, attention="kda"),
            *sweep(pairs4("kda"), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            pairs4("kda")["state_bytes"] == pairs4("gated_deltanet")["state_bytes"]
            and all(run["test"]["accuracy"] < 1.0 for run in pairs4("kda")["runs"])
            and table_verdicts(PAIRS4)["kda"] == "not separated (3 seeds)"
            and pairs4("kda")["learning_rate"] == 1e-2
            and max(pairs4("kda")["sweep"], key=pairs4("kda")["sweep"].get) == "0.01"
        ),
    ),
    Claim(
        PAGE,
        "GLA, elu's map with a decay per feature, recalls {} with elu's {} KiB, beside elu's {} at the same state "
        "(this pair's difference is not tested). It misses a few queries on every seed ({}, {} and {}), so its "
        "difference from exact attention ({}) excludes zero on its own but not after the correction for {} "
        "comparisons. Its sweep kept 3e-3 (validation accuracy {} at 1e-3, {} at 3e-3 and {} at 1e-2).",
        lambda: (
            spread(pairs4("gla")["test"]["accuracy"]),
            pairs4_kib("gla"),
            spread(pairs4("elu")["test"]["accuracy"]),
            *(f"{run['test']['accuracy']:.3f}" for run in sorted(pairs4("gla")["runs"], key=lambda r: r["seed"])),
            delta(PAIRS4, attention="gla"),
            len(data(PAIRS4)) - 1,
            *sweep(pairs4("gla"), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            pairs4("gla")["state_bytes"] == pairs4("elu")["state_bytes"]
            and pairs4("gla")["test"]["accuracy"]["mean"] > pairs4("elu")["test"]["accuracy"]["mean"]
            and all(run["test"]["accuracy"] < 1.0 for run in pairs4("gla")["runs"])
            and delta(PAIRS4, attention="gla").split("[")[1].split(",")[1].strip().startswith("-")
            and table_verdicts(PAIRS4)["gla"] == "not separated (3 seeds)"
            and pairs4("gla")["learning_rate"] == 3e-3
        ),
    ),
    Claim(
        PAGE,
        "The hybrid stack, a Gated DeltaNet layer below an exact one (Qwen3-Next's pattern cut to two layers), recalls "
        "{} with {} KiB per layer on average. Every rate of its sweep reached validation accuracy {}, {} and {} (at "
        "1e-3, 3e-3 and 1e-2), so it kept the first.",
        lambda: (
            spread(pairs4("hybrid_gated_deltanet")["test"]["accuracy"]),
            pairs4_kib("hybrid_gated_deltanet"),
            *sweep(pairs4("hybrid_gated_deltanet"), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            pairs4("hybrid_gated_deltanet")["learning_rate"] == 1e-3
            and pairs4("deltanet")["state_bytes"]
            < pairs4("hybrid_gated_deltanet")["state_bytes"]
            < pairs4("exact")["state_bytes"]
        ),
    ),
    Claim(
        PAGE,
        "Exact attention, DeltaNet and Gated DeltaNet recall every query on every seed ({}, {} and {}); the delta rule "
        "does it with a state of {} KiB per layer, against exact attention's {} KiB at 64 tokens.",
        lambda: (
            *(spread(pairs4(a)["test"]["accuracy"]) for a in _RECALL_ALL),
            pairs4_kib("deltanet"),
            pairs4_kib("exact"),
        ),
        lambda: (
            all(run["test"]["accuracy"] == 1.0 for a in _RECALL_ALL for run in pairs4(a)["runs"])
            and pairs4("deltanet")["state_bytes"] == pairs4("gated_deltanet")["state_bytes"]
            and pairs4("deltanet")["length"] == 64
        ),
    ),
    Claim(
        PAGE,
        "Positive random features recall fewer than half of the queries at every m tried: {} at m = 16, 64 and 256, "
        "the last with a state of {} KiB, more than twice exact attention's.",
        lambda: (
            span(pairs4("positive", m)["test"]["accuracy"]["mean"] for m in (16, 64, 256)),
            pairs4_kib("positive", 256),
        ),
        lambda: (
            max(run["test"]["accuracy"] for m in (16, 64, 256) for run in pairs4("positive", m)["runs"]) < 0.5
            and 2 <= pairs4("positive", 256)["state_bytes"] / pairs4("exact")["state_bytes"] < 2.5
        ),
    ),
    Claim(
        PAGE,
        "Their learning rate is the top of the grid (validation accuracy {} at 1e-2 against {} at 3e-3 and {} at "
        "1e-3); one more run at 3e-2 diverged (its loss NaN, validation accuracy {}), so above the grid only rates "
        "between 1e-2 and 3e-2 are untried.",
        lambda: (
            *sweep(pairs4("positive", 64), "0.01", "0.003", "0.001"),
            f"{data(PROBE)[0]['sweep']['0.03']:.3f}",
        ),
        lambda: (
            pairs4("positive", 64)["learning_rate"] == 1e-2
            and math.isnan(data(PROBE)[0]["runs"][0]["validation"]["loss"])
            and (data(PROBE)[0]["num_features"], data(PROBE)[0]["learning_rate"]) == (64, 3e-2)
        ),
    ),
    Claim(
        PAGE,
        "Exact attention needs the middle rate: its sweep runs reached {} at 1e-3 and {} at 1e-2 on validation, "
        "against {} at 3e-3.",
        lambda: sweep(pairs4("exact"), "0.001", "0.01", "0.003"),
        lambda: pairs4("exact")["learning_rate"] == 3e-3,
    ),
    Claim(
        PAGE,
        "The elu map, which estimates no kernel, reaches {} with the state of positive features at m = 16 ({} KiB): "
        "at equal state, the map that estimates `exp` is the one that falls short, as on the easy setting.",
        lambda: (spread(pairs4("elu")["test"]["accuracy"]), pairs4_kib("elu")),
        lambda: (
            pairs4("elu")["state_bytes"] == pairs4("positive", 16)["state_bytes"]
            and cell(PAIRS4, "verdict", attention="positive", m=16) == "worse"
            and recall_accuracy("elu") > recall_accuracy("positive", 4)
        ),
    ),
    Claim(
        PAGE,
        "A sliding window of 16 tokens reaches {} ({} KiB): through its two layers a query reaches no token more than "
        "30 before it. Its learning rate is also the top of the grid (validation accuracy {} at 1e-2 against {} at "
        "3e-3), and no larger rate was tried.",
        lambda: (
            spread(pairs4("sliding_window", 16)["test"]["accuracy"]),
            pairs4_kib("sliding_window", 16),
            *sweep(pairs4("sliding_window", 16), "0.01", "0.003"),
        ),
        lambda: pairs4("sliding_window", 16)["learning_rate"] == 1e-2,
    ),
    Claim(
        PAGE,
        "Taylor's map, Based's second-order expansion of exp, recalls every query on every seed ({}) with a state of "
        "{} KiB per layer, more than exact attention's {} KiB at this length. Its sweep kept 3e-3 (validation "
        "accuracy {} at 3e-3, {} at 1e-2 and {} at 1e-3).",
        lambda: (
            spread(pairs4("taylor")["test"]["accuracy"]),
            pairs4_kib("taylor"),
            pairs4_kib("exact"),
            *sweep(pairs4("taylor"), "0.003", "0.01", "0.001"),
        ),
        lambda: (
            all(run["test"]["accuracy"] == 1.0 for run in pairs4("taylor")["runs"])
            and pairs4("taylor")["state_bytes"] > pairs4("exact")["state_bytes"]
            and pairs4("taylor")["learning_rate"] == 3e-3
        ),
    ),
    Claim(
        PAGE,
        "Hedgehog recalls on one seed of three. At d' = 16 its seeds reach {}, {} and {} ({} KiB), at d' = 64 {}, {} "
        "and {} ({} KiB). Its sweep on seed 0 did not tell 1e-3 from 3e-3 and diverged at 1e-2 (validation accuracy {} "
        "at 1e-3, {} at 3e-3 and {} at 1e-2), so whether it learns this setting in 1500 steps depends on the seed, as "
        "exact attention's does at 8 pairs; with three seeds neither row is separated from exact attention.",
        lambda: (
            *_hedgehog_seeds(16),
            pairs4_kib("hedgehog", 16),
            *_hedgehog_seeds(64),
            pairs4_kib("hedgehog", 64),
            *sweep(pairs4("hedgehog", 64), "0.001", "0.003", "0.01"),
        ),
        lambda: (
            hedgehog_recalls_on_one_seed(16)
            and hedgehog_recalls_on_one_seed(64)
            and pairs4("hedgehog", 16)["swept_at"] == 64
            and pairs4("hedgehog", 64)["sweep"]["0.01"] == 0.0
            and abs(pairs4("hedgehog", 64)["sweep"]["0.001"] - pairs4("hedgehog", 64)["sweep"]["0.003"]) < 0.01
            and all(cell(PAIRS4, "verdict", attention="hedgehog", m=m).startswith("not separated") for m in (16, 64))
        ),
    ),
]

SETUP = ("at step 867 of 1500",)
