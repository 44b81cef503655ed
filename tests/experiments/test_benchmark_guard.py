"""The guard on speed: a benchmark's ratios against the committed figures of results/."""

import copy
import json
import pathlib

from rfa.experiments.benchmarks import guard


def test_the_committed_attention_figures_pass_against_themselves_and_a_slower_rfa_is_named(tmp_path, capsys):
    committed = json.loads((pathlib.Path(guard.RESULTS) / "benchmark_attention_cpu.json").read_text())
    output = tmp_path / "benchmark_attention_cpu.json"
    assert guard.warn_against_committed(str(output), committed) == []
    slower = copy.deepcopy(committed)
    last = slower["results"][-1]
    last["ratios"]["exact_over_bidir"] *= 0.85  # rfa 15% slower against exact at the longest L
    last["ratios"]["causal_over_bidir"] *= 1.05  # within the tolerance
    lines = guard.warn_against_committed(str(output), slower)
    assert lines == [line for line in lines if f"results/{last['length']}/ratios/exact_over_bidir" in line]
    assert len(lines) == 1 and "(-15%)" in lines[0]
    printed = capsys.readouterr().out
    assert "warning: " in printed and "note: " not in printed  # the same machine: no caveat
    slower["environment"]["cpu"] = "Another CPU (avx2)"
    guard.warn_against_committed(str(output), slower)
    assert "these on Another CPU (avx2)" in capsys.readouterr().out


def test_a_benchmark_without_committed_figures_is_not_compared(tmp_path):
    assert guard.warn_against_committed(str(tmp_path / "benchmark_new_thing.json"), {"a_over_b": 1.0}) == []


def test_a_gated_kind_whose_decoding_makes_host_calls_again_is_named(tmp_path):
    """The regression the decoding benchmark's ratios are for: gated RFA at 372 and Gated DeltaNet at 515 µs per
    token against kernelized attention's 15 (a host call per token for checks of values the model computes). The
    committed figures pass against themselves within the benchmark's own tolerance; a kind 10x slower is named."""
    committed = json.loads((pathlib.Path(guard.RESULTS) / "benchmark_decoding_cpu.json").read_text())
    output = tmp_path / "benchmark_decoding_cpu.json"
    assert guard.warn_against_committed(str(output), committed) == []
    slower = copy.deepcopy(committed)
    for kind in ("gated_rfa", "gated_deltanet"):
        slower["ratios"]["over_kernelized"][kind] *= 10
    lines = guard.warn_against_committed(str(output), slower)
    assert len(lines) == 2 and all("ratios/over_kernelized/gated" in line and "(+900%)" in line for line in lines)
    noisy = copy.deepcopy(committed)
    noisy["ratios"]["over_kernelized"]["kda"] *= 1.3  # a third: the noise of one run at 10-50 µs per token
    assert guard.warn_against_committed(str(output), noisy) == []
