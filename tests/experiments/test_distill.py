"""Hedgehog attention distillation: its loss against a NumPy reference, and the quick run end to end."""

import json

import jax
import numpy as np
import pytest
import references
from helpers import normal
from scipy import stats

from rfa.configs.studies import distillation as distill_config
from rfa.experiments.studies import distillation
from rfa.experiments.studies.distillation import measure, report


def reference_loss(q, k, key_mask, causal, weight, bias):
    """Mean over (batch, head, query) rows that see a key of -Σ_j A_ij log Â_ij, in float64."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    B, Lq, H, d = q.shape
    total, rows = 0.0, 0
    for b in range(B):
        for h in range(H):
            allowed = np.broadcast_to(np.asarray(key_mask[b], bool), (Lq, k.shape[1]))
            if causal:
                allowed = allowed & np.tril(np.ones((Lq, k.shape[1]), bool))
            logits = q[b, :, h] @ k[b, :, h].T / np.sqrt(d)
            teacher = np.where(allowed, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
            phi_q, phi_k = (references.hedgehog(x[b, :, h], None, weight[h, 0], bias[h, 0]) for x in (q, k))
            student = np.where(allowed, phi_q @ phi_k.T, 0.0)
            for i in np.flatnonzero(allowed.any(-1)):
                a = teacher[i] / teacher[i].sum()
                s = student[i] / student[i].sum()
                total -= np.sum(a[allowed[i]] * np.log(s[allowed[i]]))
                rows += 1
    return total / rows


@pytest.mark.parametrize("causal", [False, True])
def test_attention_distillation_loss_equals_the_reference(causal):
    q, k = normal(0, (2, 7, 3, 4)), normal(1, (2, 7, 3, 4))
    key_mask = np.arange(7)[None] < np.array([[7], [4]])
    weight, bias = normal(2, (3, 1, 4, 5)), normal(3, (3, 1, 5)) * 0.1
    loss = jax.jit(measure.attention_weights_loss, static_argnums=3)(q, k, key_mask, causal, weight, bias)
    np.testing.assert_allclose(loss, reference_loss(q, k, key_mask, causal, weight, bias), rtol=1e-5)


@pytest.mark.slow
def test_the_quick_distillation_trains_three_runs_and_reads_them_back(data_dir, tmp_path):
    config = distill_config.get_config("quick")
    config.data_dir = data_dir
    output = tmp_path / "distillation.json"
    distillation.main(config, str(tmp_path), str(output))  # what `rfa study distillation` runs
    summary = json.loads(output.read_text())
    assert list(summary["runs"]) == [
        "teacher (exact)",
        "student after stage 1 (maps distilled)",
        "student after stage 2 (fine-tuned)",
        "hedgehog from scratch",
    ]
    (seed,) = summary["per_seed"]
    first, last = seed["stage1_loss_first_last"]
    assert last < first  # stage 1 lowers the attention cross-entropy
    assert summary["stage1_loss"]["first"] == {"mean": first, "std": 0.0, "n": 1}
    for name, run in summary["runs"].items():
        assert run["score"]["mean"] == seed["runs"][name]["score"] == seed["runs"][name]["test"]["sequence_accuracy"]
        assert 0 <= run["score"]["mean"] <= 1
    assert (tmp_path / "seed_0" / "student" / "stage1.json").exists()
    assert "hedgehog from scratch" in (tmp_path / "distillation.md").read_text()
    assert distillation.run(config, str(tmp_path)) == summary  # finished runs are read back, not retrained


def test_seeds_combine_into_means_spreads_and_verdicts_against_the_teacher():
    teacher, student = [0.80, 0.70, 0.75], [0.60, 0.56, 0.62]
    per_seed = [
        {
            "seed": s,
            "metric": "accuracy",
            "stage1_loss_first_last": [2.0 + s, 1.0],
            "runs": {
                "teacher (exact)": report.run_summary({"accuracy": t}, 600, t),
                "student": report.run_summary({"accuracy": a}, 300, t),
            },
        }
        for s, t, a in zip(range(3), teacher, student, strict=True)
    ]
    summary = report.over_seeds(per_seed)
    run = summary["runs"]["student"]
    assert run["score"]["mean"] == pytest.approx(np.mean(student))
    assert run["score"]["std"] == pytest.approx(np.std(student, ddof=1))
    recovered = np.array(student) / np.array(teacher)  # each seed against its own teacher
    assert run["recovered"]["mean"] == pytest.approx(recovered.mean())
    assert run["versus_teacher"] == "worse"  # paired over the seeds, each against its own teacher
    assert run["difference_from_teacher"]["p"] == pytest.approx(stats.ttest_rel(student, teacher).pvalue)
    assert summary["runs"]["teacher (exact)"]["versus_teacher"] is None
    assert summary["stage1_loss"]["first"]["mean"] == pytest.approx(3.0)
    assert summary["seeds"] == [0, 1, 2]
    assert "0.593 ± 0.031" in distillation.table(summary)
