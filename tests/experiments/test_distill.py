"""Hedgehog attention distillation: its loss against a NumPy reference, and the quick run end to end."""

import json

import jax
import numpy as np
import pytest
import references
from helpers import normal

from configs import distill as distill_config
from experiments.studies import distillation


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
    loss = jax.jit(distillation.attention_weights_loss, static_argnums=3)(q, k, key_mask, causal, weight, bias)
    np.testing.assert_allclose(loss, reference_loss(q, k, key_mask, causal, weight, bias), rtol=1e-5)


@pytest.mark.slow
def test_the_quick_distillation_trains_three_runs_and_reads_them_back(data_dir, tmp_path):
    config = distill_config.get_config("quick")
    config.data_dir = data_dir
    summary = distillation.run(config, str(tmp_path))
    assert list(summary["runs"]) == ["teacher (exact)", "student after stage 1 (maps distilled)",
                                     "student after stage 2 (fine-tuned)", "hedgehog from scratch"]  # fmt: skip
    first, last = summary["stage1_loss_first_last"]
    assert last < first  # stage 1 lowers the attention cross-entropy
    assert all(0 <= run["score"] <= 1 for run in summary["runs"].values())
    assert json.loads((tmp_path / "distill.json").read_text()) == summary
    assert distillation.run(config, str(tmp_path)) == summary  # finished runs are read back, not retrained
