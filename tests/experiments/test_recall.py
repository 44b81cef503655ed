"""The recall study end to end (quick), and its state sizes against the caches' own formulas."""

import json
import os
import subprocess
import sys

import pytest

from rfa.configs.studies import recall as recall_configs
from rfa.experiments.common.study_settings import settings, training_config
from rfa.experiments.studies.recall import measure, report
from rfa.experiments.studies.recall.measure import state_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_state_bytes_are_the_kv_cache_for_exact_attention_and_the_recurrent_state_otherwise():
    study = recall_configs.get_config()
    config = training_config(study, "exact", None)
    length, heads = config.max_length, config.model.num_heads
    head_dim = config.model.d_model // heads
    assert state_bytes(config) == 2 * length * heads * head_dim * 4 + length  # float32 keys and values, bool mask
    for attention, features in (
        ("positive", 16),
        ("hedgehog", 16),
        ("elu", head_dim),
        ("taylor", 1 + head_dim + head_dim * (head_dim + 1) // 2),
    ):
        config = training_config(study, attention, 16)
        outputs = 2 * features if attention == "hedgehog" else features  # Hedgehog: [softmax(Wx), softmax(-Wx)]
        assert state_bytes(config) == heads * outputs * (head_dim + 1) * 4 + heads * 4, attention  # kv and reference


def test_a_hybrid_stacks_state_is_the_mean_of_its_layers_caches():
    study = recall_configs.get_config("pairs4_l64")
    hybrid, delta, exact = (
        state_bytes(training_config(study, a, None)) for a in ("hybrid_gated_deltanet", "gated_deltanet", "exact")
    )
    assert hybrid == (delta + exact) / 2 and delta < exact


def test_kinds_without_a_feature_count_train_once():
    study = recall_configs.get_config()
    assert ("exact", None) in settings(study) and ("taylor", None) in settings(study)
    assert [m for a, m in settings(study) if a == "positive"] == list(study.num_features)


def test_each_setting_trains_its_seeds_at_the_rate_of_the_best_validation_accuracy(tmp_path, monkeypatch):
    trained = []

    def fake_train_seeds(config, workdir, seeds):  # validation peaks at 1e-3, test would prefer 3e-3
        rate = config.optimizer.learning_rate
        trained.append((os.path.relpath(workdir, tmp_path), tuple(seeds), config.max_length))
        validation, test = {3e-4: (0.4, 0.1), 1e-3: (0.9, 0.2), 3e-3: (0.5, 0.99)}[rate]
        return {"validation": {"accuracy": {"mean": validation}}, "test": {"accuracy": {"mean": test}}}

    monkeypatch.setattr(measure, "train_seeds", fake_train_seeds)
    monkeypatch.setattr(measure, "state_bytes", lambda config: 1)
    study = recall_configs.get_config("pairs8_v256")
    study.attention, study.seeds = ("exact",), (0, 1, 2)
    (row,) = measure.run(study, str(tmp_path))
    assert trained == [
        ("exact/lr_0.0003", (0,), 64),
        ("exact/lr_0.001", (0,), 64),
        ("exact/lr_0.003", (0,), 64),
        ("exact/lr_0.001", (0, 1, 2), 64),
    ]
    assert row["learning_rate"] == 1e-3 and row["sweep"] == {"0.0003": 0.4, "0.001": 0.9, "0.003": 0.5}
    assert (row["num_pairs"], row["vocab_size"], row["length"]) == (8, 256, 64)
    row |= {"attention": "exact", "num_features": None, "seeds": [0, 1, 2], "runs": []}
    row["test"]["accuracy"] |= {"std": 0.0, "n": 3}
    assert report.table([row]).splitlines()[2] == "| exact | - | 0.0 | 0.001 | 3 | 0.200 ± 0.000 | - | - |"


def test_a_sweep_per_kind_runs_at_its_middle_feature_count_and_its_rate_serves_every_count(tmp_path, monkeypatch):
    trained = []

    def fake_train_seeds(config, workdir, seeds):  # the best validation is at 1e-2 for m = 64, 1e-3 elsewhere
        rate, m = config.optimizer.learning_rate, config.attention.num_features
        trained.append((os.path.relpath(workdir, tmp_path), tuple(seeds)))
        best = 1e-2 if m == 64 else 1e-3
        return {"validation": {"accuracy": {"mean": 1.0 if rate == best else 0.5}}}

    monkeypatch.setattr(measure, "train_seeds", fake_train_seeds)
    monkeypatch.setattr(measure, "state_bytes", lambda config: 1)
    study = recall_configs.get_config("pairs4_l64")
    study.attention = ("positive", "hedgehog", "sliding_window")
    assert settings(study) == [
        ("positive", 16),
        ("positive", 64),
        ("positive", 256),
        ("hedgehog", 16),
        ("hedgehog", 64),
        ("sliding_window", 16),
    ]
    rows = measure.run(study, str(tmp_path))
    sweeps = [name for name, seeds in trained if seeds == (0,)]
    assert sweeps == [
        f"{kind}_m{m}/lr_{rate}"
        for kind, m in (("positive", 64), ("hedgehog", 64), ("sliding_window", 16))
        for rate in ("0.001", "0.003", "0.01")
    ]
    assert [name for name, seeds in trained if seeds == (0, 1, 2)] == [
        "positive_m16/lr_0.01",
        "positive_m64/lr_0.01",
        "positive_m256/lr_0.01",
        "hedgehog_m16/lr_0.01",
        "hedgehog_m64/lr_0.01",
        "sliding_window_m16/lr_0.001",
    ]
    assert [(r["learning_rate"], r["swept_at"]) for r in rows] == [(1e-2, 64)] * 5 + [(1e-3, 16)]


def test_a_kind_given_its_rate_sweeps_nothing_and_records_where_the_rate_was_chosen(tmp_path, monkeypatch):
    trained = []

    def fake_train_seeds(config, workdir, seeds):
        trained.append((os.path.relpath(workdir, tmp_path), tuple(seeds), config.optimizer.learning_rate))
        return {"validation": {"accuracy": {"mean": 0.5}}}

    monkeypatch.setattr(measure, "train_seeds", fake_train_seeds)
    monkeypatch.setattr(measure, "state_bytes", lambda config: 1)
    study = recall_configs.get_config("pairs4_l128")
    study.attention = ("elu", "gated_deltanet")  # elu sweeps at this length; Gated DeltaNet takes 64 tokens' rate
    rows = measure.run(study, str(tmp_path))
    assert [t for t in trained if t[0].startswith("gated")] == [("gated_deltanet/lr_0.01", (0, 1, 2), 1e-2)]
    assert len([t for t in trained if t[0].startswith("elu")]) == 4  # three rates, then the seeds
    assert [(r["learning_rate"], r["sweep"], r.get("rate_from")) for r in rows][1] == (1e-2, {}, "pairs4_l64")
    assert "rate_from" not in rows[0] and len(rows[0]["sweep"]) == 3
    for row, attention, seed_accuracy in zip(rows, ("elu", "gated_deltanet"), (0.9, 0.8), strict=True):
        row |= {
            "attention": attention,
            "num_features": None,
            "seeds": [0],
            "runs": [{"seed": 0, "test": {"accuracy": seed_accuracy}}],
        }
        row["test"] = {"accuracy": {"mean": seed_accuracy, "std": 0.0, "n": 1}}
    assert [line.split(" | ")[3] for line in report.table(rows, verdicts=False).splitlines()[2:]] == [
        "0.001",  # every rate tied on validation: the first kept
        "0.01 (from pairs4_l64)",
    ]


def test_the_kernelized_delta_rule_takes_m_where_its_map_does():
    study = recall_configs.get_config("pairs4_l64")
    study.attention = ("gated_deltanet", "gated_deltanet_positive", "gated_deltanet_elu")
    assert settings(study) == [
        ("gated_deltanet", None),
        ("gated_deltanet_positive", 16),
        ("gated_deltanet_positive", 64),
        ("gated_deltanet_elu", None),
    ]
    silu, positive16, positive64, elu = (state_bytes(training_config(study, a, m)) for a, m in settings(study))
    assert silu == positive16 == elu < positive64  # keys of 16: the head size, or m = 16 features
    config = training_config(study, "gated_deltanet_positive", 64)
    heads, head_dim = config.model.num_heads, config.model.d_model // config.model.num_heads
    assert positive64 - silu == heads * (64 - head_dim) * head_dim * 4  # a state of m × d_v per head, float32


@pytest.mark.slow
def test_the_quick_recall_study_writes_its_table_and_figure(data_dir, tmp_path):
    output = tmp_path / "recall.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rfa.experiments.studies.recall",
            "--config",
            "recall:quick",
            "--workdir",
            str(tmp_path),
            f"--config.data_dir={data_dir}",
            f"--output={output}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(output.read_text())
    assert [(r["attention"], r["num_features"], r["seeds"]) for r in rows] == [
        ("exact", None, [0, 1]),
        ("positive", 8, [0, 1]),
    ]
    assert rows[0]["state_bytes"] > rows[1]["state_bytes"] > 0
    assert all(0 <= r["test"]["accuracy"]["mean"] <= 1 and r["validation"]["accuracy"]["n"] == 2 for r in rows)
    assert "Smoke test" in done.stdout and "verdict" not in done.stdout and "separated" not in done.stdout
    lines = (tmp_path / "recall.md").read_text().splitlines()
    assert (
        lines[0].startswith("Smoke test")
        and lines[2] == "| attention | m | state per layer (KiB) | seeds | test accuracy |"
    )
    assert lines[4].startswith("| exact | - |") and lines[5].startswith("| positive | 8 |") and len(lines) == 6
    assert (tmp_path / "recall.png").stat().st_size > 10_000
    assert (tmp_path / "positive_m8" / "seed_1" / "results.json").exists()
