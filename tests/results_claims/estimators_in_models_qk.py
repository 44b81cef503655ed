"""``estimators_in_models.md``, its section "The q/k scale": the layer errors with q and k scaled by s."""

from .common import Claim, data, span

PAGE = "estimators_in_models.md"


QK = "estimators_in_models_cpu_qk_scale"

_THREE = (("positive", "-"), ("oprf", "calibrated"), ("aderf", "calibrated"))

_TEXT = (("encoder", "trained"), ("decoder", "trained"), ("flax", "trained"))


def qk(model: str, state: str, estimator: str, fit: str, scale: float, measure: str = "layer_error") -> float:
    return next(
        r[measure]["mean"]
        for r in data(QK)
        if (r["model"], r["state"], r["estimator"], r["fit"], r["qk_scale"]) == (model, state, estimator, fit, scale)
    )


def _init_or_trained(state: str) -> list[tuple[str, str]]:
    return [(model, state) for model in ("encoder", "decoder", "vit", "flax")]


_ALL = _init_or_trained("init") + _init_or_trained("trained")

_SCALES = (0.5, 1.0, 1.5)

CLAIMS = [
    Claim(
        PAGE,
        "q and k are multiplied by s = {} (the logits `qᵀk/√d` by s² = {})",
        lambda: (
            ", ".join(f"{x:g}" for x in sorted({r["qk_scale"] for r in data(QK)})[:-1])
            + " and "
            + f"{max(r['qk_scale'] for r in data(QK)):g}",
            ", ".join(f"{x * x:g}" for x in sorted({r["qk_scale"] for r in data(QK)})),
        ),
    ),
    Claim(
        PAGE,
        "The standard deviation of the logits at s = 1 is {} in every model at initialization and {} after training: "
        "training grows the scale.",
        lambda: tuple(
            span((qk(*p, "trig", "-", 1.0, "logit_std") for p in _init_or_trained(state)), "{:.2f}")
            for state in ("init", "trained")
        ),
    ),
    Claim(
        PAGE,
        "Halving q and k cuts the layer error of positive features, OPRF and ADERF by {}x; multiplying them by 1.5 "
        "raises it to {}. Between these three at one scale the ratio is at most {}x (ADERF against positive "
        "features).",
        lambda: (
            span((qk(*p, *e, 1.0) / qk(*p, *e, 0.5) for p in _ALL for e in _THREE), "{:.1f}"),
            span((qk(*p, *e, 1.5) for p in _ALL for e in _THREE), "{:.2f}"),
            f"{max(qk(*p, 'positive', '-', s) / qk(*p, 'aderf', 'calibrated', s) for p in _ALL for s in _SCALES):.1f}",
        ),
    ),
    Claim(
        PAGE,
        "At s = 0.5 in the untrained models (logit std {}) trig's error is {}, as low as ADERF's {} and below "
        "positive features' {}",
        lambda: (
            span((qk(*p, "trig", "-", 0.5, "logit_std") for p in _init_or_trained("init")), "{:.2f}"),
            *(
                span((qk(*p, e, f, 0.5) for p in _init_or_trained("init")), "{:.2f}")
                for e, f in (("trig", "-"), ("aderf", "calibrated"), ("positive", "-"))
            ),
        ),
        lambda: all(
            abs(qk(*p, "trig", "-", 0.5) - qk(*p, "aderf", "calibrated", 0.5)) < 0.02
            and qk(*p, "trig", "-", 0.5) < qk(*p, "positive", "-", 0.5)
            for p in _init_or_trained("init")
        ),
    ),
    Claim(
        PAGE,
        "in the trained text models it fails even at s = 0.5 ({}; their logits' spread there is {}, against the "
        "trained ViT's {}, where trig still works).",
        lambda: (
            span((qk(*p, "trig", "-", 0.5) for p in _TEXT), "{:.2f}"),
            span((qk(*p, "trig", "-", 0.5, "logit_std") for p in _TEXT), "{:.2f}"),
            f"{qk('vit', 'trained', 'trig', '-', 0.5, 'logit_std'):.2f}",
        ),
        lambda: qk("vit", "trained", "trig", "-", 0.5) < 0.2 < min(qk(*p, "trig", "-", 0.5) for p in _TEXT),
    ),
    Claim(
        PAGE,
        "At s = 1 it has {} of OPRF's error at initialization and {} of it after training.",
        lambda: tuple(
            span(
                (
                    qk(*p, "aderf", "calibrated", 1.0) / qk(*p, "oprf", "calibrated", 1.0)
                    for p in _init_or_trained(state)
                ),
                "{:.2f}",
            )
            for state in ("init", "trained")
        ),
    ),
]

SETUP = (
    "run by the same command",
    "every model, state and seed above",
    "on the same scaled inputs",
    "where the kernel is near 1",
)
