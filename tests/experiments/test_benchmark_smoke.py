"""Every benchmark runs as a user runs it, at smoke sizes, and writes its JSON and figure (split from
test_runner.py so that the two halves run on both test workers).

The thirteen command lines run in turn in one subprocess (:func:`helpers.run_in_turn`), each as ``python -m MODULE
FLAGS`` runs it: thirteen subprocesses would pay Python's, JAX's and rfa's start-up thirteen times. An exception ends
the subprocess there, with its traceback in the assertion's message; every command must exit with status 0."""

import json
import os

import pytest
from helpers import run_in_turn


@pytest.mark.slow
def test_benchmarks_write_json(tmp_path, data_dir):
    benchmark = "rfa.experiments.benchmarks."
    ran = run_in_turn(
        [
            [
                benchmark + "attention",
                "--lengths=64",
                "--repeats=1",
                "--min_repeats=1",
                f"--output={tmp_path / 'attention.json'}",
                "--huge_pages=false",
                "--estimators=positive,hybrid,aderf",
                "--estimators_length=64",
            ],
            [benchmark + "mse", "--variant=quick", f"--output={tmp_path / 'mse.json'}"],
            [
                benchmark + "decoding",
                "--positions=8",  # one position: each kind compiled once with its checks, once without
                "--kinds=kda",
                "--steps=2",
                "--repeats=1",
                f"--output={tmp_path / 'decoding.json'}",
            ],
            [
                benchmark + "flax_decoding",
                "--positions=8,128",
                "--layers=kda",
                "--steps=2",
                "--repeats=1",
                "--features=16",
                "--heads=2",
                "--num_features=8",
                f"--output={tmp_path / 'flax_decoding.json'}",
            ],
            [benchmark + "checks", "--length=32", "--repeats=1", f"--output={tmp_path / 'checks.json'}"],
            [
                benchmark + "scaling",
                "--lengths=32,64",
                "--repeats=1",
                "--fit_from=32",
                "--kinds=exact,gated",  # both models, softmax and (in the decoder) gated positive features
                "--num_layers=1",
                f"--output={tmp_path / 'scaling.json'}",
            ],
            [
                benchmark + "relative",
                "--lengths=16,32",
                "--repeats=1",
                "--dense_max=16",
                f"--output={tmp_path / 'relative.json'}",
            ],
            [
                benchmark + "delta_rule",
                "--lengths=16",
                "--repeats=1",
                "--recurrent_max=8",
                "--exact_max=16",
                f"--output={tmp_path / 'delta.json'}",
            ],
            [
                benchmark + "precision",
                "--lengths=16",
                "--kinds=kda",
                "--repeats=1",
                f"--output={tmp_path / 'precision.json'}",
            ],
            [benchmark + "prefill", "--lengths=4,8", "--repeats=1", f"--output={tmp_path / 'prefill.json'}"],
            [
                benchmark + "pretrained",
                "--families=qwen3_5",  # a hybrid: Gated DeltaNet and gated attention
                "--batches=1,2",
                "--lengths=8,16",
                "--max_tokens=16",  # B = 2 at P = 16 skipped
                "--new_tokens=2",
                "--repeats=1",
                "--hidden=128",
                "--vocab=256",
                f"--output={tmp_path / 'pretrained.json'}",
            ],
            [
                benchmark + "train_step",
                "--configs=compare_kernels:quick,recall:quick",  # sort and MQAR, exact and positive at m = 8
                "--repeats=2",
                "--huge_pages=false",  # re-executing would end the commands' process here
                f"--data_dir={data_dir}",
                f"--output={tmp_path / 'train_step.json'}",
            ],
            [
                benchmark + "input_work",
                "--tasks=sort",
                "--processes=1,2",
                "--steps=2",
                "--batch_size=4",
                "--max_length=32",
                f"--data_dir={data_dir}",
                f"--output={tmp_path / 'input_work.json'}",
            ],
        ]
    )
    for done in ran:
        assert done.returncode == 0, done.stderr[-6000:]
    attention = json.loads((tmp_path / "attention.json").read_text())
    assert [r["length"] for r in attention["results"]] == [64]
    assert attention["environment"]["xla_flags"] == os.environ.get("XLA_FLAGS")  # what the compiler was told
    for result in attention["results"]:
        for case in ("exact", "bidir", "causal", "gated"):
            assert result["cases"][case]["median_ms"] > 0 and result["cases"][case]["memory"]["peak_bytes"] > 0
        assert result["ratios"]["gated_over_causal"] > 0
    rows = attention["estimators"]["estimators"]
    assert {name: row["features"] for name, row in rows.items()} == {"positive": 256, "hybrid": 1536, "aderf": 256}
    assert rows["positive"]["over_positive"] == 1.0 and "fit" not in rows["positive"]
    assert rows["aderf"]["fit"]["median_ms"] > 0 and rows["aderf"]["fit_over_forward"] > 0
    prefill = json.loads((tmp_path / "prefill.json").read_text())
    assert [r["length"] for r in prefill["results"]] == [4, 8] and prefill["results"][0]["channel"]["recurrent_ms"] > 0
    pretrained = json.loads((tmp_path / "pretrained.json").read_text())
    assert [(r["family"], r["batch"], r["prompt"]) for r in pretrained["results"]] == [
        ("qwen3_5", 1, 8),
        ("qwen3_5", 1, 16),
        ("qwen3_5", 2, 8),
    ]
    assert all(r["rfa"]["prefill_tokens_per_s"] > 0 for r in pretrained["results"])
    assert (tmp_path / "pretrained.png").stat().st_size > 10_000
    precision = json.loads((tmp_path / "precision.json").read_text())["results"][0]
    assert precision["state_dtype"] == "float32" and 0 < precision["output_error"] < 0.02
    mse = json.loads((tmp_path / "mse.json").read_text())
    assert mse["feature_evaluations"] == 2000 * 14 * 2 * (128 + 64) and mse["feature_evaluations_per_second"] > 0
    flax_decoding = json.loads((tmp_path / "flax_decoding.json").read_text())
    layers = {"flax", "rfa", "kda"}  # --layers: the state layer asked for, beside Flax's and rfa's attention
    assert set(flax_decoding["seconds_per_token"]) == layers and "rfa_ratio_128_vs_128" in flax_decoding
    assert set(flax_decoding["ratios"]["checks_over_unchecked"]) == layers - {"flax"}
    assert (tmp_path / "flax_decoding.png").exists()
    checks = json.loads((tmp_path / "checks.json").read_text())
    assert set(checks["ratio_with_vs_without"]) == {"traced mask", "traced log_decay", "forecaster"}
    scaling = json.loads((tmp_path / "scaling.json").read_text())
    assert {(r["model"], r["kind"]) for r in scaling["results"]} == {
        ("decoder", "exact"),
        ("decoder", "gated"),
        ("encoder", "exact"),  # --kinds: each model times the kinds it has (the encoder has no gate)
    }
    assert "faster_than_exact_from" in scaling["summary"]["decoder/gated"]  # the crossover against exact
    assert all(r["median_ms"] > 0 and r["memory"]["peak_bytes"] > 0 for r in scaling["results"])
    assert all(isinstance(fit["time_slope"], float) for fit in scaling["summary"].values())
    assert (tmp_path / "scaling.png").stat().st_size > 10_000
    input_work = json.loads((tmp_path / "input_work.json").read_text())["processes"]
    # sort drops pairs by their length: every process reads the whole global batch
    assert [(r["processes"], r["process"], r["examples_per_step"]) for r in input_work] == [
        (1, 0, 4),
        (2, 0, 4),
        (2, 1, 4),
    ]
    relative = json.loads((tmp_path / "relative.json").read_text())
    assert [sorted(set(r) - {"length"}) for r in relative["results"]] == [
        ["dense", "fft", "no bias"],
        ["fft", "no bias"],
    ]
    assert relative["slopes"]["dense"] is None and isinstance(relative["slopes"]["fft"], float)
    assert (tmp_path / "relative.png").stat().st_size > 10_000
    delta = json.loads((tmp_path / "delta.json").read_text())  # the recurrent form left out above its maximum
    assert [sorted(set(r) - {"length"}) for r in delta["results"]] == [
        ["delta chunked", "exact", "gated causal", "gla chunked", "kda chunked"],
    ]
    assert set(delta["ratios"]) == {"delta_over_gla", "gla_over_gated_causal", "kda_over_delta"}
    assert set(delta["ratios"]["kda_over_delta"]) == {"16"} and (tmp_path / "delta.png").stat().st_size > 10_000
    train_step = json.loads((tmp_path / "train_step.json").read_text())
    assert train_step["repeats"] == 2 and set(train_step["configs"]) == {"compare_kernels:quick", "recall:quick"}
    for name, task in (("compare_kernels:quick", "sort"), ("recall:quick", "mqar")):
        config = train_step["configs"][name]  # per config: every setting's time and its ratio to exact attention's
        assert set(config["seconds_per_step"]) == set(config["settings"]) == {"exact", "positive_m8"}
        assert all(seconds > 0 for seconds in config["seconds_per_step"].values())
        assert set(config["ratios"]) == {"exact_over_exact", "positive_m8_over_exact"}
        assert config["ratios"]["exact_over_exact"] == 1.0
        assert config["ratios"]["positive_m8_over_exact"] == pytest.approx(
            config["seconds_per_step"]["positive_m8"] / config["seconds_per_step"]["exact"]
        )
        assert config["settings"]["positive_m8"] | {"batch_size": 0, "max_length": 0} == {
            "attention": "positive",
            "num_features": 8,
            "qk_map": None,
            "task": task,
            "batch_size": 0,
            "max_length": 0,
        }
    recall_decode = train_step["configs"]["recall:quick"]  # the decoder's tokens too; sort's model is not one
    assert set(recall_decode["seconds_per_token"]) == {"exact", "positive_m8"}
    assert recall_decode["decode_ratios"]["positive_m8_over_exact"] == pytest.approx(
        recall_decode["seconds_per_token"]["positive_m8"] / recall_decode["seconds_per_token"]["exact"]
    )
    assert "seconds_per_token" not in train_step["configs"]["compare_kernels:quick"]
    decoding = json.loads((tmp_path / "decoding.json").read_text())
    kinds = {"kernelized", "kda"}  # --kinds, and kernelized attention, every ratio's reference
    assert set(decoding["seconds_per_token"]) == kinds
    assert all(t > 0 for d in decoding["seconds_per_token"].values() for t in d.values())
    assert set(decoding["ratios"]["checks_over_unchecked"]) == kinds
