"""The GPU run plan's figures (docs/MODELS.md): measured on tiny random models of each architecture, then
projected to the real models on one 140 GB GPU.

    .venv/bin/python bench/profile_throughput.py [--lengths 1024 4096] [--items 4]

Measured here (CPU): per input, the time to assemble it as the model reads it (tokenizer, image
pricing, template, middle truncation: CPU work that stays on the host when the model runs on a GPU),
and the tiny model's forward throughput (tokens/s) per architecture.
Projected: the real model's forward time from its FLOPs (2 x parameters x tokens, plus causal attention
2 x layers x tokens^2 x hidden) at an assumed effective bf16 rate (--gpu-tflops, default 400 of an H200's
989 dense), calibrated by the tiny model's measured FLOP rate only in the printed ratio; peak memory at
32K = bf16 weights + one layer's activations with SDPA/FlashAttention (no tokens^2 matrix), and what eager
attention would add. Prints ratios and figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Base-model shapes (config.json of each base: Qwen2-VL-2B/7B-Instruct, Qwen3-VL-2B/4B/8B, Qwen2.5-VL-3B;
# Embed-RL-2B/4B are Qwen3-VL-2B/4B, ZoengHN/Embed-RL's README):
# parameters (billions, mteb's ModelMeta where it has the model), layers, hidden, MLP width, attention heads.
REAL = {
    "qwen3-vl-2b": (2.13, 28, 2048, 6144, 16), "qwen3-vl-8b": (8.14, 36, 4096, 12288, 32),
    "gme-qwen2-vl-2b": (2.21, 28, 1536, 8960, 12), "gme-qwen2-vl-7b": (8.29, 28, 3584, 18944, 28),
    "rzen-v2-7b": (8.29, 28, 3584, 18944, 28), "ops-mm-v1-2b": (2.21, 28, 1536, 8960, 12),
    "ops-mm-v1-7b": (8.29, 28, 3584, 18944, 28), "embed-rl-2b": (2.13, 28, 2048, 6144, 16),
    "embed-rl-4b": (4.44, 36, 2560, 9728, 32), "vlm2vec-qwen2vl-2b": (2.21, 28, 1536, 8960, 12),
    "jina-embeddings-v4": (3.75, 36, 2048, 11008, 16), "colqwen2.5": (3.75, 36, 2048, 11008, 16),
}
FAMILY_OF = {"qwen3_vl": "qwen3-vl-2b", "qwen2_vl": "gme-qwen2-vl-2b", "qwen2_5_vl": "jina-embeddings-v4"}
GIB = 1024 ** 3


def flops(params_b: float, layers: int, hidden: int, tokens: int) -> float:
    return 2 * params_b * 1e9 * tokens + 2 * layers * tokens * tokens * hidden


def peak_memory_gib(params_b: float, hidden: int, mlp: int, heads: int, tokens: int, batch: int = 1):
    """bf16 weights + one layer's live activations (residual, attention output, MLP gate/up/act) with a
    fused attention kernel; and the extra of eager attention (heads x tokens^2 fp32 scores)."""
    weights = params_b * 1e9 * 2
    activations = batch * tokens * (6 * hidden + 3 * mlp) * 2
    eager = batch * heads * tokens * tokens * 4
    return weights / GIB, (weights + activations) / GIB, eager / GIB


def measure(family: str, directory: Path, lengths: list[int], items: int) -> list[tuple[int, float, float]]:
    """(length, assembly seconds per input, tiny forward tokens/s) per length."""
    import dataclasses

    from harness.scoring.data import Item
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel
    from harness.profiles.catalogue import get_profile

    # the architecture is what is measured: a profile of the family, run whatever its status
    profile = dataclasses.replace(get_profile(FAMILY_OF[family]), family=family, runnable=True)
    model = ProfileModel(profile, RunSettings(progress=False, max_length=max(lengths) + 64), str(directory))
    out = []
    for length in lengths:
        batch = [Item(f"d{k}", " ".join(f"w{k}x{i}" for i in range(length // 3)), ()) for k in range(items)]
        start = time.perf_counter()
        encoded = [model.encode_item(item) for item in batch]
        assembly = (time.perf_counter() - start) / items
        start = time.perf_counter()
        model.embed(batch[:1])  # warm
        start = time.perf_counter()
        for item in batch:
            model.embed([item])
        forward = time.perf_counter() - start - assembly * items
        out.append((length, assembly, sum(len(e.ids) for e in encoded) / max(forward, 1e-9)))
    return out


def main() -> None:
    from harness.models.tiny_models import FAMILIES, make_tiny

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--gpu-tflops", type=float, default=400.0, help="assumed effective bf16 TFLOP/s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            for length, assembly, tokens_per_s in measure(family, make_tiny(Path(tmp) / family, family),
                                                         args.lengths, args.items):
                print(f"tiny {family:<10} {length:>6} tokens: assembly {assembly * 1e3:7.1f} ms/input, "
                      f"forward {tokens_per_s:9.0f} tokens/s (CPU)")
    print(f"\nprojection for one 140 GB GPU at {args.gpu_tflops:g} effective bf16 TFLOP/s, batch 1:")
    # the host's assembly per input of real pools (pages, text) is bench/score_throughput.py's to measure
    print("| model | bf16 weights GiB | peak at 32K (SDPA/FA) GiB | eager attention adds GiB | s per 8K | s per 32K |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (params, layers, hidden, mlp, heads) in REAL.items():
        weights, peak, eager = peak_memory_gib(params, hidden, mlp, heads, 32768)
        seconds = forward_seconds(name, args.gpu_tflops)
        print(f"| {name} | {weights:.1f} | {peak:.1f} | {eager:.0f} | {seconds[0]:.2f} | {seconds[1]:.2f} |")


def forward_seconds(name: str, gpu_tflops: float = 400.0) -> tuple[float, float]:
    """The projected forward seconds of one 8K and one 32K input of the real model ``name``."""
    params, layers, hidden, _, _ = REAL[name]
    return tuple(flops(params, layers, hidden, t) / (gpu_tflops * 1e12) for t in (8192, 32768))


if __name__ == "__main__":
    main()
