"""``forecasting.md``: sunspots, CO₂, and the step time against the lookback."""

from .common import CO2, Claim, co2_every_kind_better, data, span, table

PAGE = "forecasting.md"


def _timing(kind: str, end: int) -> dict:
    return data("forecast_cpu")["timing"][kind][end]


def _timing_values(kind: str) -> tuple:
    first, last = _timing(kind, 0), _timing(kind, -1)
    return (
        f"{data('forecast_cpu')['slopes'][kind]:.2f}",
        f"{first['median_ms'] / 1e3:.2f}",
        f"{last['median_ms'] / 1e3:.1f}",
        f"{first['memory']['peak_bytes'] / 2**20:.0f}",
    )


SUNSPOTS = "forecast_sunspots_cpu"


def _sun(attention: str) -> dict:
    return next(r for r in data(SUNSPOTS)["runs"] if r["attention"] == attention)


def _sun_means(kinds, split="test") -> str:
    return span((_sun(a)[split]["mse"]["mean"] for a in kinds), "{:.3f}")


_SUN_BETTER, _SUN_OTHERS = ("exact", "taylor", "hedgehog"), ("positive", "simplex_positive", "elu")

CLAIMS = [
    Claim(
        PAGE,
        "It keeps the small configuration (validation MSE {} against {})",
        lambda: tuple(f"{data(SUNSPOTS)['selection']['candidates'][c]:.4f}" for c in ("", "earlier")),
        lambda: data(SUNSPOTS)["selection"]["chosen"] == "",
    ),
    Claim(
        PAGE,
        "Exact attention, Taylor and Hedgehog are better than seasonal-naive (MSE {} against {}); positive, simplex "
        "and elu features have lower means ({}) but are not separated at 3 seeds, their seeds spreading more "
        "(positive features' third seed {}, the others {} and {}).",
        lambda: (
            _sun_means(_SUN_BETTER),
            f"{data(SUNSPOTS)['seasonal_naive']['mse']:.3f}",
            _sun_means(_SUN_OTHERS),
            *(f"{_sun('positive')['runs'][i]['test']['mse']:.3f}" for i in (2, 0, 1)),
        ),
        lambda: (
            [row["verdict"] for row in table(SUNSPOTS)][:-1]
            == [
                "better" if a in _SUN_BETTER else "not separated (3 seeds)"
                for a in (r["attention"] for r in data(SUNSPOTS)["runs"])
            ]
        ),
    ),
    Claim(
        PAGE,
        "Validation MSE (1916–1962) is higher than test MSE for every kind (means {})",
        lambda: (_sun_means(_SUN_BETTER + _SUN_OTHERS, "validation"),),
        lambda: all(r["validation"]["mse"]["mean"] > r["test"]["mse"]["mean"] for r in data(SUNSPOTS)["runs"]),
    ),
    Claim(
        PAGE,
        "exact attention's step grows with slope {} in the log-log fit over L = 128 … 2048 ({} s to {} s, peak memory "
        "{} MiB to {} GiB), positive features' with slope {} ({} s to {} s, {} MiB to {} GiB); at L = 2048 "
        "kernelized is {}x faster.",
        lambda: (
            *_timing_values("exact"),
            f"{_timing('exact', -1)['memory']['peak_bytes'] / 2**30:.0f}",
            *_timing_values("positive"),
            f"{_timing('positive', -1)['memory']['peak_bytes'] / 2**30:.1f}",
            f"{_timing('exact', -1)['median_ms'] / _timing('positive', -1)['median_ms']:.1f}",
        ),
        lambda: [t["lookback"] for t in data("forecast_cpu")["timing"]["exact"]][::4] == [128, 2048],
    ),
    Claim(
        PAGE,
        "Every kind is better than seasonal-naive, by a factor of {} in MSE ({} against {})",
        lambda: (
            span((data(CO2)["seasonal_naive"]["mse"] / r["test"]["mse"]["mean"] for r in data(CO2)["runs"]), "{:.1f}"),
            span((r["test"]["mse"]["mean"] for r in data(CO2)["runs"]), "{:.4f}"),
            f"{data(CO2)['seasonal_naive']['mse']:.4f}",
        ),
        lambda: co2_every_kind_better(),
    ),
    Claim(
        PAGE,
        "The table does not compare the kinds with each other; their means differ by less than the largest standard "
        "deviation ({}).",
        lambda: (f"{max(r['test']['mse']['std'] for r in data(CO2)['runs']):.4f}",),
        lambda: (
            (
                max(r["test"]["mse"]["mean"] for r in data(CO2)["runs"])
                - min(r["test"]["mse"]["mean"] for r in data(CO2)["runs"])
            )
            < max(r["test"]["mse"]["std"] for r in data(CO2)["runs"])
        ),
    ),
]

SETUP = (
    "in patches of 4",
    "(lookback 64, two layers of width 32,",
    "own scale is 1500",
    "one layer of width 16 with dropout 0.2 and weight decay 0.1 (3.8k parameters, 400 steps of 16 windows)",
)
