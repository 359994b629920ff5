#!/usr/bin/env python3
"""The PyTorch + PEFT baseline for `quorum train`'s speed: the same base model (dequantized
from the same GGUF to f32), the same LoRA configuration and the same token sequences in the same
order (`quorum train --write-sequences FILE`), one sequence per micro-batch, loss on the answer
tokens only (the vocabulary projection only where an answer token is predicted, as Quorum does),
AdamW, gradient accumulation and clipping. Prints tokens/s per step and overall.

  python scripts/bench-train-torch.py --gguf MODEL.gguf --sequences seq.jsonl --steps 3

or, on a Hugging Face directory (a synthetic checkpoint on a GPU machine, scripts/gpu/train-check.sh):

  python scripts/bench-train-torch.py --model-dir DIR --device cuda --sequences seq.jsonl

With --adapter DIR it trains nothing: it loads a `quorum train` adapter with PEFT's own loader
(PeftModel.from_pretrained) and prints the mean answer loss of the first sequences with and
without it, the check that PEFT reads Quorum's adapters as Quorum trained them.

Needs torch, transformers, peft and (for --gguf) gguf (pip). Nothing is downloaded at run time.
"""
import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser()
    base = p.add_mutually_exclusive_group(required=True)
    base.add_argument("--gguf", help="the GGUF file quorum train used")
    base.add_argument("--model-dir", help="the Hugging Face directory quorum train used")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--sequences", required=True, help="JSONL from quorum train --write-sequences")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--grad-accumulation", type=int, default=8)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=4e-4)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--adapter", help="a quorum train output directory: evaluate, do not train")
    p.add_argument("--eval-sequences", type=int, default=16)
    args = p.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    started = time.time()
    if args.gguf:
        model = AutoModelForCausalLM.from_pretrained(
            os.path.dirname(os.path.abspath(args.gguf)),
            gguf_file=os.path.basename(args.gguf),
            torch_dtype=torch.float32,
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
    model = model.to(args.device)
    model.config.use_cache = False
    with open(args.sequences) as f:
        sequences = [json.loads(line) for line in f]
    if args.adapter:
        evaluate_adapter(model, args.adapter, sequences[: args.eval_sequences])
        return
    model = get_peft_model(
        model,
        LoraConfig(
            r=args.rank,
            lora_alpha=args.alpha,
            lora_dropout=args.dropout,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            bias="none",
            task_type="CAUSAL_LM",
        ),
    )
    model.train()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"torch {torch.__version__}, {args.device}, {args.threads} threads, model loaded in "
          f"{time.time() - started:.1f} s, {trainable} trainable parameters", flush=True)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=args.lr, betas=(0.9, 0.999),
        eps=1e-8, weight_decay=0.0)
    needed = args.steps * args.grad_accumulation
    if len(sequences) < needed:
        raise SystemExit(f"{args.sequences} has {len(sequences)} sequences, {needed} needed")

    total_tokens, total_seconds = 0, 0.0
    for step in range(args.steps):
        t0 = time.time()
        tokens, loss_sum = 0, 0.0
        for micro in range(args.grad_accumulation):
            seq = sequences[step * args.grad_accumulation + micro]
            ids = torch.tensor([seq["tokens"]], device=args.device)
            start = seq["answer_start"]
            answer = ids[0, start:]
            # Logits of positions start-1 .. T-2 predict the answer tokens start .. T-1.
            out = model(input_ids=ids, logits_to_keep=len(answer) + 1)
            logits = out.logits[0, :-1, :]
            loss = torch.nn.functional.cross_entropy(logits, answer)
            (loss / args.grad_accumulation).backward()
            loss_sum += loss.item()
            tokens += ids.shape[1]
        torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.time() - t0
        total_tokens += tokens
        total_seconds += seconds
        print(json.dumps({"step": step + 1, "loss": loss_sum / args.grad_accumulation,
                          "tokens": tokens, "seconds": seconds,
                          "tokens_per_s": tokens / seconds}), flush=True)
    print(f"pytorch+peft: {total_tokens} tokens in {total_seconds:.1f} s, "
          f"{total_tokens / total_seconds:.1f} tok/s", flush=True)


def answer_loss(model, seq):
    import torch
    ids = torch.tensor([seq["tokens"]])
    answer = ids[0, seq["answer_start"]:]
    logits = model(input_ids=ids, logits_to_keep=len(answer) + 1).logits[0, :-1, :]
    return torch.nn.functional.cross_entropy(logits, answer).item()


def evaluate_adapter(base, adapter_dir, sequences):
    import torch
    from peft import PeftModel
    base.eval()
    with torch.no_grad():
        before = [answer_loss(base, s) for s in sequences]
        model = PeftModel.from_pretrained(base, adapter_dir)
        model.eval()
        loaded = sum(1 for n, _ in model.named_parameters() if "lora_A" in n)
        after = [answer_loss(model, s) for s in sequences]
    mean = lambda xs: sum(xs) / len(xs)
    print(f"peft: loaded {adapter_dir} ({loaded} LoRA pairs); mean answer loss over "
          f"{len(sequences)} training sequences: base {mean(before):.4f}, "
          f"with the adapter {mean(after):.4f}", flush=True)


if __name__ == "__main__":
    main()
