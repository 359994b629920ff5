"""PyTorch + transformers baseline for the GPU check (scripts/gpu/device-check.sh): the same
synthetic checkpoint, the same prompts (token ids from the checkpoint's own tokenizer.json), on
the same GPU in the same call. Writes one JSON object: the device-to-device copy bandwidth, and
for each dtype asked for (bf16 and f32 unless named) the batch-1 decode, 64-way decode and
2k-token prefill rates.

Usage: torch_bench.py CHECKPOINT_DIR OUT_JSON [DTYPE ...]
"""

import json
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

SHORT = "How many singers do we have?"
LONG = ("SELECT name, capacity FROM stadium WHERE capacity > 5000 ORDER BY capacity DESC; " * 40)[:2000]


def timed(fn, repeats=1):
    """Median wall time of fn() over `repeats` runs, the GPU synchronized around each."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def copy_bandwidth():
    """Bytes read plus bytes written per second by a large device-to-device copy."""
    x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    secs = timed(lambda: y.copy_(x), repeats=10)
    del x, y
    return 2 * (4 << 30) / secs


def bench(model, short_ids, long_ids):
    dev = "cuda"
    short = torch.tensor([short_ids], device=dev)

    def gen(ids, n):
        return model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                              attention_mask=torch.ones_like(ids))

    gen(short, 4)  # warm-up
    t1 = timed(lambda: gen(short, 1), repeats=3)
    t129 = timed(lambda: gen(short, 129), repeats=3)
    batch = short.repeat(64, 1)
    gen(batch, 4)
    t64 = timed(lambda: gen(batch, 64), repeats=3)
    long = torch.tensor([long_ids], device=dev)
    with torch.no_grad():
        model(long)
        tp = timed(lambda: model(long), repeats=3)
    return {
        "decode_tok_s_batch1": 128 / (t129 - t1),
        "decode_tok_s_batch64": 64 * 64 / t64,
        "prefill_tok_s": len(long_ids) / tp,
        "prefill_tokens": len(long_ids),
    }


def main():
    ckpt, out = sys.argv[1], sys.argv[2]
    tok = Tokenizer.from_file(f"{ckpt}/tokenizer.json")
    short_ids = tok.encode(SHORT, add_special_tokens=False).ids
    long_ids = tok.encode(LONG, add_special_tokens=False).ids
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
              "copy_bytes_per_s": copy_bandwidth()}
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    for name in sys.argv[3:] or list(dtypes):
        dtype = dtypes[name]
        t = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype).to("cuda").eval()
        load = time.perf_counter() - t
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        r = bench(model, short_ids, long_ids)
        r["load_s"] = load
        r["weight_bytes"] = weight_bytes
        # Share of the memory roofline: each decode step reads every weight once.
        r["roofline_share_batch1"] = r["decode_tok_s_batch1"] * weight_bytes / result["copy_bytes_per_s"]
        result[name] = r
        print(name, json.dumps(r), flush=True)
        del model
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
