#!/usr/bin/env python3
"""A merged export (`quorum train --export-merged DIR`) read by transformers, against the base
GGUF with the PEFT adapter in transformers + PEFT: last-position logits and a greedy completion
of one prompt (a file, asked as a user turn and answered from "```sql\\nSELECT ", as the
pipeline does).

  python scripts/check-merged-torch.py --merged DIR --gguf MODEL.gguf --adapter ADAPTER_DIR \\
      --prompt PROMPT.txt

Needs torch, transformers, peft and gguf (pip). Nothing is downloaded at run time.
"""
import argparse
import os

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--merged", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.merged)
    messages = [{"role": "user", "content": open(args.prompt).read()}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tok(text + "```sql\nSELECT ", return_tensors="pt").input_ids
    merged = AutoModelForCausalLM.from_pretrained(args.merged, dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(args.gguf)),
        gguf_file=os.path.basename(args.gguf),
        dtype=torch.float32,
    )
    adapted = PeftModel.from_pretrained(base, args.adapter)
    with torch.no_grad():
        folded = merged(ids).logits[0, -1]
        with_adapter = adapted(ids).logits[0, -1]
        with adapted.disable_adapter():
            bare = adapted(ids).logits[0, -1]
    print(f"prompt tokens: {ids.shape[1]}")
    print(f"max |merged - base+adapter|: {(folded - with_adapter).abs().max().item():.4f}"
          f" (logit scale {with_adapter.abs().max().item():.2f})")
    print(f"max |base - base+adapter|:   {(bare - with_adapter).abs().max().item():.4f}")
    greedy = dict(max_new_tokens=args.tokens, do_sample=False)
    a = merged.generate(ids, **greedy)[0, ids.shape[1]:]
    b = adapted.generate(input_ids=ids, **greedy)[0, ids.shape[1]:]
    print("merged:      ", tok.decode(a))
    print("base+adapter:", tok.decode(b))
    print("greedy tokens identical:", a.tolist() == b.tolist())


if __name__ == "__main__":
    main()
