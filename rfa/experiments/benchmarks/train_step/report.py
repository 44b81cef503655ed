"""The training-step benchmark's table, from its JSON alone (no JAX, no flags)."""

from __future__ import annotations

from rfa.experiments.common.report import markdown_table, number, setting_name


def table(data: dict) -> str:
    """``rfa benchmark train_step``: per study config, every setting's median training step and its ratio to exact
    attention's in the same config (timed side by side, in one process), and where its model is a decoder, the same
    of a decoded token ("-" elsewhere)."""

    def timed(config: dict, key: str, times: str, ratios: str, scale: float) -> list[str]:
        return [
            number(config.get(times, {}).get(key), scale, "{:.1f}"),
            number(config.get(ratios, {}).get(f"{key}_over_exact"), 1, "{:.2f}x"),
        ]

    rows = [
        [
            name,
            setting_name(setting["attention"], None, setting.get("qk_map")),
            "-" if setting["num_features"] is None else str(setting["num_features"]),
            f"{setting['batch_size']} × {setting['max_length']}",
            *timed(config, key, "seconds_per_step", "ratios", 1e3),
            *timed(config, key, "seconds_per_token", "decode_ratios", 1e6),
        ]
        for name, config in data["configs"].items()
        for key, setting in config["settings"].items()
    ]
    header = ["config", "attention", "m", "batch × length", "ms per step", "/ exact", "µs per decoded token", "/ exact"]
    return markdown_table(header, rows)
