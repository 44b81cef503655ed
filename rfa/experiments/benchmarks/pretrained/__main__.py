from __future__ import annotations

import functools
import importlib.util
import tempfile
import time

import jax
import numpy as np
from absl import flags
from flax import nnx

from rfa.experiments.benchmarks.guard import publish
from rfa.experiments.benchmarks.pretrained import __doc__  # noqa: F401 (--help shows the benchmark's description)
from rfa.experiments.benchmarks.pretrained.report import figure, table
from rfa.experiments.common.cli import run_main
from rfa.experiments.common.timing import environment
from rfa.models import (
    CausalLM,
    KimiLinearConfig,
    Qwen3_5Config,
    Qwen3_5MoeConfig,
    Qwen3Config,
    Qwen3NextConfig,
    decoding,
    save_pretrained,
)

_FAMILIES = flags.DEFINE_list("families", None, "Families of FAMILIES to time (default: all).")
_BATCHES = flags.DEFINE_list("batches", ["1", "8"], "Batch sizes B.")
_LENGTHS = flags.DEFINE_list("lengths", ["128", "1024", "4096"], "Prompt lengths P.")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 8192, "Cases with B * P above this are skipped.")
_NEW = flags.DEFINE_integer("new_tokens", 32, "Tokens decoded after the first (the decoding throughput's).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls per case and library (median reported).")
_WIDTH = flags.DEFINE_integer("hidden", 512, "hidden_size of every family (heads of 64: hidden / 64 of them).")
_VOCAB = flags.DEFINE_integer("vocab", 32768, "vocab_size of every family.")
_TRANSFORMERS = flags.DEFINE_bool(
    "transformers", True, "Time transformers' generate beside rfa's where PyTorch and transformers are installed."
)
_OUTPUT = flags.DEFINE_string("output", None, "JSON path; default <workdir>/benchmark_pretrained.json.")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/benchmarks", "Where the JSON, table and figure go.")


def _widths(hidden: int, vocab: int, length: int) -> dict:
    heads = hidden // 64
    return dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=4,
        num_attention_heads=heads,
        pad_id=0,
    ) | ({"max_position_embeddings": length} if length else {})


def _qwen(hidden: int, vocab: int, length: int, **fields) -> dict:
    return _widths(hidden, vocab, length) | dict(num_key_value_heads=max(1, hidden // 256), head_dim=64, **fields)


def _linear(hidden: int) -> dict:
    heads = hidden // 128
    return dict(
        linear_num_key_heads=heads, linear_num_value_heads=2 * heads, linear_key_head_dim=64, linear_value_head_dim=64
    )


def _experts(hidden: int) -> dict:
    return dict(
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=hidden, shared_expert_intermediate_size=hidden
    )


FAMILIES = {
    "qwen3": lambda h, v, n: Qwen3Config(**_qwen(h, v, n, intermediate_size=3 * h)),
    "qwen3_5": lambda h, v, n: Qwen3_5Config(**_qwen(h, v, n, intermediate_size=3 * h), **_linear(h)),
    "qwen3_5_moe": lambda h, v, n: Qwen3_5MoeConfig(**_qwen(h, v, n), **_linear(h), **_experts(h)),
    "qwen3_next": lambda h, v, n: Qwen3NextConfig(
        **_qwen(h, v, n, intermediate_size=3 * h), **_linear(h), **_experts(h)
    ),
    "kimi_linear": lambda h, v, n: KimiLinearConfig(
        **_widths(h, v, 0),
        intermediate_size=3 * h,
        model_max_length=n,
        kv_lora_rank=h // 4,
        qk_nope_head_dim=64,
        qk_rope_head_dim=32,
        v_head_dim=64,
        linear_num_heads=h // 64,
        linear_head_dim=64,
        num_experts=8,
        num_experts_per_token=2,
        moe_intermediate_size=h,
        mlp_layer_types=("dense", "sparse", "sparse", "sparse"),
    ),
}
"""A family's config at hidden ``h``, vocabulary ``v`` and longest sequence ``n``."""


def _time(call, args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(call(*args))
    return time.perf_counter() - start


def _transformers_installed() -> bool:
    return bool(_TRANSFORMERS.value and importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"))


def _transformers_generate(directory: str):
    """transformers' ``generate`` of the checkpoint in ``directory`` (greedy, exactly ``tokens`` new), or None where
    PyTorch or transformers is not installed."""
    if not _transformers_installed():
        return None
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()

    def generate(prompt: np.ndarray, tokens: int):
        with torch.no_grad():
            ids = torch.from_numpy(np.array(prompt))  # a copy: torch writes to its own
            mask = torch.ones_like(ids)
            return model.generate(
                ids, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0
            )

    return lambda prompt, tokens: generate(prompt, tokens).numpy()


def measure(family: str, batches: list[int], lengths: list[int]) -> list[dict]:
    """Every case of one family: ``{"family", "batch", "prompt", "rfa": {...}, "transformers": {...}}``."""
    new = _NEW.value
    config = FAMILIES[family](_WIDTH.value, _VOCAB.value, max(lengths) + new + 1)
    model = CausalLM(config, rngs=nnx.Rngs(0))
    with tempfile.TemporaryDirectory() as directory:
        save_pretrained(model, directory)
        theirs = _transformers_generate(directory)
        rows = []
        for batch in batches:
            for length in lengths:
                if batch * length > _MAX_TOKENS.value:
                    continue
                prompt = jax.random.randint(jax.random.key(length), (batch, length), 1, _VOCAB.value)
                calls = {
                    ("rfa", tokens): (functools.partial(decoding.generate, model, max_new_tokens=tokens), (prompt,))
                    for tokens in (1, 1 + new)
                }
                if theirs is not None:
                    calls |= {("transformers", t): (theirs, (np.asarray(prompt), t)) for t in (1, 1 + new)}
                for call, args in calls.values():  # compile rfa's programs; warm transformers' up
                    _time(call, args)
                times = {case: [] for case in calls}
                order = np.random.default_rng(0)
                for _ in range(_REPEATS.value):
                    for i in order.permutation(len(calls)):
                        case = list(calls)[i]
                        times[case].append(_time(*calls[case]))
                row = {"family": family, "batch": batch, "prompt": length}
                for library in dict.fromkeys(name for name, _ in calls):
                    first, more = (float(np.median(times[(library, t)])) for t in (1, 1 + new))
                    row[library] = {
                        "first_token_s": first,
                        "first_and_new_s": more,
                        "prefill_tokens_per_s": batch * length / first,
                        # None where the noise hid the decoding steps (t(1 + new) not above t(1))
                        "decode_tokens_per_s": batch * new / (more - first) if more > first else None,
                    }
                rows.append(row)
                print(row, flush=True)
    return rows


def main(argv):
    del argv
    families = _FAMILIES.value or list(FAMILIES)
    batches, lengths = [int(b) for b in _BATCHES.value], [int(p) for p in _LENGTHS.value]
    rows = [row for family in families for row in measure(family, batches, lengths)]
    versions, threads = {}, None
    if _transformers_installed():
        import torch
        import transformers

        versions, threads = (
            {"torch": torch.__version__, "transformers": transformers.__version__},
            torch.get_num_threads(),
        )
    results = {
        "config": {
            "hidden": _WIDTH.value,
            "vocab": _VOCAB.value,
            "layers": 4,
            "new_tokens": _NEW.value,
            "repeats": _REPEATS.value,
            "max_tokens": _MAX_TOKENS.value,
            "dtype": "float32",
            "torch_threads": threads,
        },
        "results": rows,
        "ratios": {
            f"decode_rfa_over_transformers_{r['family']}_b{r['batch']}_p{r['prompt']}": (
                r["rfa"]["decode_tokens_per_s"] / r["transformers"]["decode_tokens_per_s"]
            )
            for r in rows
            if "transformers" in r and r["rfa"]["decode_tokens_per_s"] and r["transformers"]["decode_tokens_per_s"]
        },
        "environment": environment() | {"versions": versions},
    }
    publish(
        results,
        table(results),
        _OUTPUT.value,
        _WORKDIR.value,
        "benchmark_pretrained.json",
        lambda p: figure(results, p),
    )


if __name__ == "__main__":
    run_main(main)
