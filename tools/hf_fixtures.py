"""Fixtures from transformers' own models: a tiny, randomly initialized checkpoint of each family in Hugging Face's
layout, and what transformers computes with it.

Run by hand, in an environment of its own (the suite needs neither PyTorch nor transformers; it reads the files):

    python -m venv /tmp/hf && /tmp/hf/bin/pip install torch==2.13.0 'transformers>=5' numpy
    /tmp/hf/bin/python tools/hf_fixtures.py

Each family writes ``tests/fixtures/hf/<family>/``: the directory ``save_pretrained`` writes (``config.json``,
``model.safetensors`` in bfloat16: every weight is rounded to bfloat16 first, so the float32 model transformers runs
holds exactly the values rfa reads) and ``expected.npz``:

- ``tokens``, ``logits``: 2 rows of 12 token ids and transformers' float32 logits;
- ``prompt``, ``greedy``: one prompt of 6 tokens and its greedy continuation of 8 (``generate(do_sample=False)``);
- ``padded``, ``padded_mask``, ``padded_logits``, ``padded_greedy``: prompts of 7 and 4 tokens left-padded with
  ``pad_token_id`` (``attention_mask`` 0 there), their logits and their greedy continuation of 8;
- ``bfloat16_logits``: the logits of ``tokens`` from the checkpoint loaded in bfloat16
  (``from_pretrained(directory, dtype=torch.bfloat16)``, what a user runs), as float32: how far transformers' own
  bfloat16 model is from its float32 one, beside rfa's.

Every weight is redrawn at a scale that makes each part matter (the norms' too, which start at 1).
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
import transformers

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf"
VOCAB, PAD = 256, 0
DECODER = dict(  # every family's: 4 layers, heads wider than hidden_size / heads (as Qwen3's own), GQA
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=64,
    tie_word_embeddings=False,
    pad_token_id=PAD,
)
HYBRID = dict(  # Qwen3.5's and Qwen3-Next's: three Gated DeltaNet layers with grouped value heads, then gated attention
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
)
FAMILIES = {
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(**DECODER, rope_theta=10000.0)),
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", dict(**DECODER, **HYBRID)),
    "qwen3_next": (
        "Qwen3NextConfig",
        "Qwen3NextForCausalLM",
        dict(
            **DECODER,
            **HYBRID,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            decoder_sparse_step=1,
            mlp_only_layers=[1],  # a dense layer among the sparse ones
        ),
    ),
    "kimi_linear": (
        "KimiLinearConfig",
        "KimiLinearForCausalLM",
        dict(
            **{k: v for k, v in DECODER.items() if k not in ("head_dim", "num_key_value_heads")},
            num_key_value_heads=4,
            kv_lora_rank=16,  # multi-head latent attention, without rotary positions
            qk_nope_head_dim=16,
            qk_rope_head_dim=8,
            v_head_dim=16,
            linear_num_heads=4,  # KDA
            linear_head_dim=16,
            linear_conv_kernel_dim=4,
            layer_types=["linear_attention"] * 3 + ["full_attention"],
            mlp_layer_types=["dense"] + ["sparse"] * 3,
            num_local_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            n_shared_experts=1,
            n_group=2,  # DeepSeek-V3's router: two groups, the better one's experts
            topk_group=1,
            routed_scaling_factor=2.446,
            rms_norm_eps=1e-5,
        ),
    ),
    "qwen3_5_moe": (  # every layer sparse: no dense MLP (no intermediate_size)
        "Qwen3_5MoeTextConfig",
        "Qwen3_5MoeForCausalLM",
        dict(
            **{k: v for k, v in DECODER.items() if k != "intermediate_size"},
            **HYBRID,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
        ),
    ),
}


def build(config_class: str, model_class: str, arguments: dict, seed: int = 0):
    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**arguments)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):  # RMSNorm scales around 1 (zero-centered ones: their offsets around 0)
                centered = abs(float(parameter.mean())) < 0.5
                parameter.copy_((0 if centered else 1) + 0.2 * torch.randn_like(parameter))
            elif name.endswith(("A_log", "dt_bias")):  # decays that matter, neither 0 nor total
                parameter.copy_(0.5 * torch.randn_like(parameter))
            else:
                parameter.copy_(torch.randn_like(parameter) / parameter.shape[-1] ** 0.5)
            parameter.copy_(parameter.to(torch.bfloat16).to(torch.float32))
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # a router's bias that changes which experts are chosen
                buffer.copy_((0.3 * torch.randn_like(buffer)).to(torch.bfloat16).to(torch.float32))
    return model


def greedy(model, tokens, mask=None) -> np.ndarray:
    out = model.generate(
        torch.tensor(tokens),
        attention_mask=None if mask is None else torch.tensor(mask),
        max_new_tokens=8,
        do_sample=False,
        pad_token_id=PAD,
        eos_token_id=None,
    )
    return out[:, tokens.shape[1] :].numpy()


def main() -> None:
    rng = np.random.default_rng(0)
    for family, (config_class, model_class, arguments) in FAMILIES.items():
        model = build(config_class, model_class, arguments)
        directory = OUT / family
        # the weights in bfloat16 (model.to(bfloat16) would round the rotary frequencies' buffer as well)
        model.save_pretrained(directory, state_dict={k: v.to(torch.bfloat16) for k, v in model.state_dict().items()})
        tokens = rng.integers(1, VOCAB, (2, 12))
        prompt = rng.integers(1, VOCAB, (1, 6))
        lengths = (7, 4)
        padded = np.full((2, max(lengths)), PAD)
        for row, length in enumerate(lengths):
            padded[row, -length:] = rng.integers(1, VOCAB, length)
        mask = (padded != PAD).astype(np.int64)
        low = getattr(transformers, model_class).from_pretrained(directory, dtype=torch.bfloat16).eval()
        with torch.no_grad():
            logits = model(torch.tensor(tokens)).logits.numpy()
            padded_logits = model(torch.tensor(padded), attention_mask=torch.tensor(mask)).logits.numpy()
            bfloat16_logits = low(torch.tensor(tokens)).logits.float().numpy()
        np.savez(
            directory / "expected.npz",
            tokens=tokens,
            logits=logits,
            prompt=prompt,
            greedy=greedy(model, prompt),
            padded=padded,
            padded_mask=mask.astype(bool),
            padded_logits=padded_logits,
            padded_greedy=greedy(model, padded, mask),
            bfloat16_logits=bfloat16_logits,
        )
        print(family, "->", directory, sorted(p.name for p in directory.iterdir()))


if __name__ == "__main__":
    main()
