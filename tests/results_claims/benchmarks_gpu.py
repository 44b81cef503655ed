"""``benchmarks.md``, its section "On a GPU: one H200"."""

from .common import ESTIMATOR_COSTS, Claim, attention_case, data, delta_ms, delta_ratio, estimator_cost, fit_share

PAGE = "benchmarks.md"


ATTENTION_GPU, DELTA_RULE_GPU = "benchmark_attention_gpu", "benchmark_delta_rule_gpu"


def _gpu_ms(case: str, length: int) -> float:
    return attention_case(case, length, ATTENTION_GPU)["median_ms"]


def _gpu_tflops(case: str, length: int) -> float:
    return attention_case(case, length, ATTENTION_GPU)["achieved_flops_per_s"] / 1e12


def _gpu_delta_ratio(top: str, bottom: str, length: int) -> float:
    return delta_ms(length, top, DELTA_RULE_GPU) / delta_ms(length, bottom, DELTA_RULE_GPU)


def _gpu_lengths(name: str) -> list[int]:
    return [row["length"] for row in data(name)["results"]]


GPU_CLAIMS = [
    Claim(
        PAGE,
        "ran there unchanged, one run each, with the image's JAX {} (float32; XLA's default matmul precision, which "
        "reaches {:.0f} TFLOP/s on the benchmark's {}² matmul)",
        lambda: (
            data(ATTENTION_GPU)["environment"]["jax_version"],
            data(ATTENTION_GPU)["matmul_peak"]["flops_per_s"] / 1e12,
            data(ATTENTION_GPU)["matmul_peak"]["n"],
        ),
        lambda: (
            data(ATTENTION_GPU)["environment"]["device_kind"]
            == data(DELTA_RULE_GPU)["environment"]["device_kind"]
            == "NVIDIA H200"
            and data(ATTENTION_GPU)["config"]["dtype"] == "float32"
            and data(ATTENTION_GPU)["estimators"] is None
            and _gpu_lengths(ATTENTION_GPU) == [1024 * 2**i for i in range(7)]
            and data(ATTENTION_GPU)["config"]["skip_exact_above"] == 32768
        ),
    ),
    Claim(
        PAGE,
        "Bidirectional kernelized attention (m = {}) takes {:.2f} ms at L = 2048 where exact attention takes {:.2f}, "
        "and {:.2f} ms at 32768 where exact attention takes {:.2f}: {:.0f}x.",
        lambda: (
            data(ATTENTION_GPU)["config"]["num_features"],
            _gpu_ms("bidir", 2048),
            _gpu_ms("exact", 2048),
            _gpu_ms("bidir", 32768),
            _gpu_ms("exact", 32768),
            _gpu_ms("exact", 32768) / _gpu_ms("bidir", 32768),
        ),
        lambda: all(_gpu_ms("bidir", n) < _gpu_ms("exact", n) for n in (2048, 4096, 8192, 16384, 32768)),
    ),
    Claim(
        PAGE,
        "The chunked causal form is slower than exact attention up to 8192 tokens ({:.2f} ms against {:.2f}) and "
        "faster from 16384 ({:.2f} ms against {:.2f}; {:.1f}x at 32768): on this GPU the crossover lies between 8192 "
        "and 16384 tokens. The causal form reaches {:.1f} TFLOP/s at 32768, where the bidirectional one reaches {:.1f} "
        "and exact attention {:.1f}. Not profiled; its scan walks {} chunks of {} tokens one after the other, each a "
        "small program for the GPU.",
        lambda: (
            _gpu_ms("causal", 8192),
            _gpu_ms("exact", 8192),
            _gpu_ms("causal", 16384),
            _gpu_ms("exact", 16384),
            _gpu_ms("exact", 32768) / _gpu_ms("causal", 32768),
            _gpu_tflops("causal", 32768),
            _gpu_tflops("bidir", 32768),
            _gpu_tflops("exact", 32768),
            32768 // data(ATTENTION_GPU)["config"]["chunk_size"],
            data(ATTENTION_GPU)["config"]["chunk_size"],
        ),
        lambda: (
            all(_gpu_ms("causal", n) > _gpu_ms("exact", n) for n in (1024, 2048, 4096, 8192))
            and all(_gpu_ms("causal", n) < _gpu_ms("exact", n) for n in (16384, 32768))
        ),
    ),
    Claim(
        PAGE,
        "Exact attention's forward and backward at 32768 tokens takes {:.1f} GiB (XLA's buffer assignment, which "
        "rematerialization could not bring lower); at 65536 it would not fit, and was not run. The kernelized forms "
        "need {:.0f}, {:.0f} and {:.0f} KiB per token (bidirectional, causal, gated) at 32768, and take {:.2f}, {:.2f} "
        "and {:.2f} ms at 65536.",
        lambda: (
            attention_case("exact", 32768, ATTENTION_GPU)["memory"]["peak_bytes"] / 2**30,
            *(
                attention_case(c, 32768, ATTENTION_GPU)["peak_bytes_per_token"] / 1024
                for c in ("bidir", "causal", "gated")
            ),
            *(_gpu_ms(c, 65536) for c in ("bidir", "causal", "gated")),
        ),
        lambda: (
            next(r for r in data(ATTENTION_GPU)["results"] if r["length"] == 65536)["cases"].get("exact") is None
            and 4 * attention_case("exact", 32768, ATTENTION_GPU)["memory"]["peak_bytes"] > 139 * 2**30
        ),
    ),
    Claim(
        PAGE,
        "The chunked delta rule takes {:.1f} ms at 2048 tokens, against its recurrent form's {:.1f} ({:.0f}x), and "
        "{:.1f} ms at 8192, against exact attention's {:.1f}.",
        lambda: (
            delta_ms(2048, "delta chunked", DELTA_RULE_GPU),
            delta_ms(2048, "delta recurrent", DELTA_RULE_GPU),
            _gpu_delta_ratio("delta recurrent", "delta chunked", 2048),
            delta_ms(8192, "delta chunked", DELTA_RULE_GPU),
            delta_ms(8192, "exact", DELTA_RULE_GPU),
        ),
        lambda: _gpu_lengths(DELTA_RULE_GPU) == [512, 1024, 2048, 4096, 8192],
    ),
    Claim(
        PAGE,
        "Both chunk targets are met on the GPU: GLA's chunk is {:.2f}x the form with one decay per token at 8192 "
        "({:.2f}x at 4096 on the CPU, which misses it), KDA's {:.2f}x Gated DeltaNet's ({:.2f}x).",
        lambda: (
            _gpu_delta_ratio("gla chunked", "gated causal", 8192),
            delta_ratio("gla_over_gated_causal", 4096),
            _gpu_delta_ratio("kda chunked", "delta chunked", 8192),
            delta_ratio("kda_over_delta", 4096),
        ),
        lambda: (
            _gpu_delta_ratio("gla chunked", "gated causal", 8192) <= 2 < delta_ratio("gla_over_gated_causal", 4096)
            and _gpu_delta_ratio("kda chunked", "delta chunked", 8192) <= 2
        ),
    ),
]

ESTIMATOR_COSTS_GPU = "benchmark_attention_estimators_gpu"

GPU_ESTIMATOR_CLAIMS = [
    Claim(
        PAGE,
        "The features cost less against each other than on the CPU: hybrid's 6m features are {:.2f}x positive's cost "
        "({:.2f}x on the CPU), trig's 2m {:.2f}x ({:.2f}x).",
        lambda: tuple(
            estimator_cost(estimator, name)["over_positive"]
            for estimator in ("hybrid", "trig")
            for name in (ESTIMATOR_COSTS_GPU, ESTIMATOR_COSTS)
        ),
        lambda: (
            data(ESTIMATOR_COSTS_GPU)["estimators"]["length"] == 4096
            and data(ESTIMATOR_COSTS_GPU)["environment"]["device_kind"] == "NVIDIA H200"
            and all(
                estimator_cost(e, ESTIMATOR_COSTS_GPU)["over_positive"] < estimator_cost(e)["over_positive"]
                for e in ("trig", "hyperbolic", "hybrid")
            )
        ),
    ),
    Claim(
        PAGE,
        "The fits cost relatively more: ADERF's two eigendecompositions per head take {:.2f} ms, {:.0f}% of its "
        "forward and backward ({:.1f}% on the CPU), SDERF's fit {:.0f}%; the fits of OPRF and SADERF, without an "
        "eigendecomposition, {:.0f}% and {:.0f}%.",
        lambda: (
            estimator_cost("aderf", ESTIMATOR_COSTS_GPU)["fit"]["median_ms"],
            fit_share("aderf", ESTIMATOR_COSTS_GPU),
            fit_share("aderf"),
            fit_share("sderf", ESTIMATOR_COSTS_GPU),
            fit_share("oprf", ESTIMATOR_COSTS_GPU),
            fit_share("saderf", ESTIMATOR_COSTS_GPU),
        ),
        lambda: all(fit_share(e, ESTIMATOR_COSTS_GPU) > fit_share(e) for e in ("oprf", "aderf", "saderf", "sderf")),
    ),
]

CLAIMS = GPU_CLAIMS + GPU_ESTIMATOR_CLAIMS

SETUP = ("64k",)
