#!/usr/bin/env python3
"""The device check's headline figures as one JSON file, from the logs it wrote.

Usage: figures.py LOGS OUT HALF    (writes OUT/gpu-figures.json and prints it)

Ratios against PyTorch come from the same call's scripts/gpu/torch_bench.py; the gRPC ratio is
against the same build with QUORUM_CUDA_KERNELS=0 (candle's ops: the GPU path before Quorum's
kernels). A figure whose log is missing or unreadable is null, never guessed.
"""
import json
import os
import re
import subprocess
import sys
from datetime import date

ENGINE = re.compile(
    r"(\d+) copies, (\d+) decoded the same tokens; prompt (\d+) tokens, last first token at "
    r"([\d.]+) s; \d+ tokens after the first, aggregate decode ([\d.]+) tok/s"
)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def engine_runs(path):
    """{copies: (same, prompt_tokens, first_token_s, decode_tok_s)} of one engine log, its
    warm-up run left out."""
    text = "\n".join(l for l in (read(path) or "").splitlines() if not l.startswith("warm-up:"))
    return {
        int(m[1]): (int(m[2]), int(m[3]), float(m[4]), float(m[5])) for m in ENGINE.finditer(text)
    }


STEP = re.compile(r"tokens=(\d+) seqs=(\d+) queued_us=(\d+) step_us=(\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def step_timing(path):
    """{seqs: [median queued ms, median step ms, steps]} over a log's decode steps (one token
    a sequence), from the engine's `quorum_engine::step_timing` debug lines."""
    by_seqs = {}
    for m in STEP.finditer(ANSI.sub("", read(path) or "")):
        tokens, seqs, queued, step = map(int, m.groups())
        if tokens == seqs:
            by_seqs.setdefault(seqs, []).append((queued, step))
    median = lambda xs: sorted(xs)[len(xs) // 2]
    return {
        seqs: [round(median([q for q, _ in v]) / 1e3, 3), round(median([t for _, t in v]) / 1e3, 3), len(v)]
        for seqs, v in sorted(by_seqs.items())
    }


def load_tok_s(path):
    for line in (read(path) or "").splitlines():
        if line.startswith("{") and "output_tok_s" in line:
            return json.loads(line)["output_tok_s"]
    return None


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def main():
    logs, out, half = sys.argv[1:4]
    torch = json.loads(read(f"{logs}/torch-7b.json") or "{}")
    th = torch.get(half, {})
    on = engine_runs(f"{logs}/engine-7b-{half}-kernels1.log")
    off = engine_runs(f"{logs}/engine-7b-{half}-kernels0.log")
    prefill = engine_runs(f"{logs}/engine-7b-{half}-kernels1-prefill2k.log").get(1)
    prefill_off = engine_runs(f"{logs}/engine-7b-{half}-kernels0-prefill2k.log").get(1)
    prefill_products = engine_runs(f"{logs}/engine-7b-{half}-products-prefill2k.log").get(1)
    cublas_decode1 = engine_runs(f"{logs}/engine-7b-{half}-cublas-decode.log").get(1)
    lora3 = engine_runs(f"{logs}/engine-7b-{half}-lora3.log").get(64)
    lora_f32 = engine_runs(f"{logs}/lora3-0.5b-f32.log").get(16)
    mixed = engine_runs(f"{logs}/engine-7b-{half}-mixed.log").get(64)
    mixed_f32 = engine_runs(f"{logs}/mixed-0.5b-f32.log").get(16)
    invariant = engine_runs(f"{logs}/engine-7b-{half}-invariant.log")
    decode1 = on.get(1, (None, None, None, None))[3]
    decode64 = on.get(64, (None, None, None, None))[3]
    prefill_tok_s = prefill[1] / prefill[2] if prefill else None
    roofline = None
    if decode1 and th.get("weight_bytes") and torch.get("copy_bytes_per_s"):
        roofline = round(decode1 * th["weight_bytes"] / torch["copy_bytes_per_s"], 3)
    kernels = json.loads(read(f"{out}/kernel-check.json") or "{}")
    summary = read(f"{out}/summary.txt") or ""
    # The engine's 64 copies of each agreement prompt (0.5B, f32): all the first copy's tokens.
    agree64 = [engine_runs(f"{logs}/agree-{i}-gpu-engine.log").get(64) for i in range(5)]
    greedy = re.search(r"completions equal to the CPU's on 5 prompts: GPU greedy loop (\d)/5, GPU engine (\d)/5", summary)
    try:
        device = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        device = None
    figures = {
        "device": device,
        "date": date.today().isoformat(),
        "commit": (read("gpu-bundle/commit") or "").strip() or None,
        "dtype": half,
        "roofline_batch1": roofline,
        "decode1_tok_s": decode1,
        "decode64_tok_s": decode64,
        "decode64_vs_torch": ratio(decode64, th.get("decode_tok_s_batch64")),
        "decode64_vs_kernels_off": ratio(decode64, off.get(64, (None,) * 4)[3]),
        "copies64_same_tokens": on.get(64, (None,) * 4)[0],
        "prefill2k_tok_s": round(prefill_tok_s, 1) if prefill_tok_s else None,
        "prefill2k_vs_torch": ratio(prefill_tok_s, th.get("prefill_tok_s")),
        "prefill2k_vs_kernels_off": ratio(prefill_tok_s, prefill_off[1] / prefill_off[2] if prefill_off else None),
        # prefill_attention against the two-product path (QUORUM_PREFILL_KERNEL=0).
        "prefill2k_vs_products": ratio(prefill_tok_s, prefill_products[1] / prefill_products[2] if prefill_products else None),
        # skinny_matmul against cuBLAS for the projections of a batch-1 step
        # (QUORUM_SKINNY_KERNEL=0).
        "decode1_vs_cublas": ratio(decode1, cublas_decode1[3] if cublas_decode1 else None),
        # The batch-invariant mode: its 64 copies against its single copy, and its decode rates
        # against the default mode's in the same call (its cost).
        "invariant_copies64_same_tokens": invariant.get(64, (None,) * 4)[0],
        "invariant_decode1_vs_plain": ratio(invariant.get(1, (None,) * 4)[3], decode1),
        "invariant_decode64_vs_plain": ratio(invariant.get(64, (None,) * 4)[3], decode64),
        "lora3_vs_plain": ratio(lora3[3] if lora3 else None, decode64),
        "lora3_f32_same_as_alone": (read(f"{logs}/lora3-0.5b-f32.log") or "").find("decoded other tokens") < 0
        if lora_f32 else None,
        # Half the copies sampling: the greedy rows' arg-max on the device, the sampled rows
        # copied to the host.
        "mixed64_vs_plain": ratio(mixed[3] if mixed else None, decode64),
        "mixed_f32_same_as_alone": (read(f"{logs}/mixed-0.5b-f32.log") or "").find("decoded other tokens") < 0
        if mixed_f32 else None,
        "grpc64_vs_main": ratio(load_tok_s(f"{logs}/load-7b-64-new.log"), load_tok_s(f"{logs}/load-7b-64-kernels0.log")),
        "grpc64_baseline": "the same build with QUORUM_CUDA_KERNELS=0 (candle's ops)",
        "greedy_equal": f"greedy loop {greedy[1]}/5, engine {greedy[2]}/5" if greedy else None,
        "engine64_f32_same_tokens": f"{sum(1 for r in agree64 if r and r[0] == 64)}/5"
        if any(agree64) else None,
        "kernel_tests": f"{kernels['passed']}/{kernels['total']}" if "total" in kernels else None,
        # Decode steps of the 7B: {sequences: [median ms queueing the pass, median ms of the
        # whole step, steps]}; queueing near the whole step means the host bounds it.
        "step_timing_kernels1": step_timing(f"{logs}/engine-7b-{half}-kernels1.log"),
        "step_timing_kernels0": step_timing(f"{logs}/engine-7b-{half}-kernels0.log"),
        "step_timing_cublas_decode": step_timing(f"{logs}/engine-7b-{half}-cublas-decode.log"),
        "step_timing_lora3": step_timing(f"{logs}/engine-7b-{half}-lora3.log"),
        "step_timing_invariant": step_timing(f"{logs}/engine-7b-{half}-invariant.log"),
    }
    os.makedirs(out, exist_ok=True)
    with open(f"{out}/gpu-figures.json", "w") as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
