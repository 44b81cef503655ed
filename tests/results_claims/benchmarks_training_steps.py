"""``benchmarks.md``, its sections "Training steps side by side", "The cost of the run-time checks", "Input work per
process" and "The full Fig. 2 sweep"."""

import math
import statistics

from .common import TRAIN_STEP, Claim, data, pairs4

PAGE = "benchmarks.md"


TRAIN_STEP_FIRST = "benchmark_train_step_cpu_first"  # the same command an hour earlier, under the same load

SORT_CONFIG = "compare_kernels:sort"


def _ratio_changes(key: str) -> list[tuple[float, str, str]]:
    """``(|first / committed - 1|, config, setting)`` of every ratio ``key`` (step or decoding) but exact's own."""
    first, committed = data(TRAIN_STEP_FIRST)["configs"], data(TRAIN_STEP)["configs"]
    return [
        (abs(first[config][key][name] / ratio - 1), config, name)
        for config in committed
        for name, ratio in committed[config].get(key, {}).items()
        if not name.startswith("exact_")
    ]


TRAIN_STEP_CLAIMS = [
    Claim(
        PAGE,
        "differs from this one by more than 10% in {} of the {} step ratios to exact attention, by {:.0f}% at most "
        "(hybrid's 6m features on sort: {:.2f}x there, {:.2f}x here), and in {} of the {} decoding ratios, by {:.0f}% "
        "at most: read a ratio to within 40%.",
        lambda: (
            sum(change > 0.1 for change, *_ in _ratio_changes("ratios")),
            len(_ratio_changes("ratios")),
            100 * max(_ratio_changes("ratios"))[0],
            data(TRAIN_STEP_FIRST)["configs"][SORT_CONFIG]["ratios"]["hybrid_m64_over_exact"],
            data(TRAIN_STEP)["configs"][SORT_CONFIG]["ratios"]["hybrid_m64_over_exact"],
            sum(change > 0.1 for change, *_ in _ratio_changes("decode_ratios")),
            len(_ratio_changes("decode_ratios")),
            100 * max(_ratio_changes("decode_ratios"))[0],
        ),
        lambda: (
            max(_ratio_changes("ratios"))[1:] == (SORT_CONFIG, "hybrid_m64_over_exact")
            and max(change for change, *_ in _ratio_changes("ratios") + _ratio_changes("decode_ratios")) < 0.4
        ),
    ),
    Claim(
        PAGE,
        "The other core was training the recall study's models meanwhile (a load average of {:.1f} to {:.1f}).",
        lambda: (
            min(*data(TRAIN_STEP)["load_average"].values(), *data(TRAIN_STEP_FIRST)["load_average"].values()),
            max(*data(TRAIN_STEP)["load_average"].values(), *data(TRAIN_STEP_FIRST)["load_average"].values()),
        ),
    ),
    Claim(
        PAGE,
        "the recall runs at 64 tokens record DeltaNet at {:.0f} ms against exact attention's {:.0f}",
        lambda: tuple(1e3 * pairs4(a)["step_time_s"] for a in ("deltanet", "exact")),
    ),
]


def _input_work(task: str, count: int) -> list[dict]:
    return [r for r in data("benchmark_input_work_cpu")["processes"] if (r["task"], r["processes"]) == (task, count)]


_PROCESS_COUNTS = (1, 2, 4)

INPUT_WORK = [
    Claim(
        PAGE,
        "ListOps reads {:g}, {:g} and {:g} examples per process per step at P = 1, 2 and 4, and its time per batch "
        "falls with them, {:.1f}, {:.1f} and {:.1f} ms (medians over the processes).",
        lambda: (
            *(_input_work("listops", p)[0]["examples_per_step"] for p in _PROCESS_COUNTS),
            *(1e3 * statistics.median(r["seconds"] for r in _input_work("listops", p)) for p in _PROCESS_COUNTS),
        ),
        lambda: all(r["examples_per_step"] == 64 / p for p in _PROCESS_COUNTS for r in _input_work("listops", p)),
    ),
    Claim(
        PAGE,
        "every process reads the whole global batch, {:g} examples per step at every P.",
        lambda: (_input_work("sort", 1)[0]["examples_per_step"],),
        lambda: {r["examples_per_step"] for p in _PROCESS_COUNTS for r in _input_work("sort", p)} == {64},
    ),
]

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def powers_of_ten(value: float) -> str:
    """``value`` as the page writes a large count: 5.6·10⁹, or 10⁴ for a power of ten."""
    exponent = math.floor(math.log10(value))
    mantissa = value / 10**exponent
    power = f"10{str(exponent).translate(_SUPERSCRIPT)}"
    return power if f"{mantissa:.1f}" == "1.0" else f"{mantissa:.1f}·{power}"


CHECKS_AND_SWEEP = [
    Claim(
        PAGE,
        "The traced mask's {:.0f}% was examined",
        lambda: (100 * (data("benchmark_checks_cpu")["ratio_with_vs_without"]["traced mask"] - 1),),
    ),
    Claim(
        PAGE,
        "{} angles × {} lengths × {{{}}}, m = {}, d = {}, {} repetitions per point ({} cells, {} feature evaluations, "
        "counting φ(x) and φ(y)), from an empty workdir, compilation, closed forms, figures and report included: "
        "{:.1f} s wall on this 2-core CPU, {} feature evaluations/s (target < 60 s).",
        lambda: (
            *(data("benchmark_mse_cpu")["sweep"][k] for k in ("angles", "lengths")),
            ", ".join(data("benchmark_mse_cpu")["sweep"]["estimators"]),
            *(data("benchmark_mse_cpu")["sweep"][k] for k in ("m", "d")),
            powers_of_ten(data("benchmark_mse_cpu")["sweep"]["repetitions"]),
            data("benchmark_mse_cpu")["sweep"]["cells"],
            powers_of_ten(data("benchmark_mse_cpu")["feature_evaluations"]),
            data("benchmark_mse_cpu")["wall_seconds"],
            powers_of_ten(data("benchmark_mse_cpu")["feature_evaluations_per_second"]),
        ),
        lambda: (
            data("benchmark_mse_cpu")["wall_seconds"] < 60
            and data("benchmark_mse_cpu")["sweep"]["cells"]
            == math.prod(data("benchmark_mse_cpu")["sweep"][k] for k in ("angles", "lengths"))
            * len(data("benchmark_mse_cpu")["sweep"]["estimators"])
        ),
    ),
]

CLAIMS = TRAIN_STEP_CLAIMS + CHECKS_AND_SWEEP + INPUT_WORK

SETUP = (
    "256 rows of 64 tokens",
    "median of 15",
    "median of 30",
    "each giving 50 batches of its rows of a global batch of 64 rows of length 128",
)
