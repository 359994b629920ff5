"""llama.cpp (llama-cpp-python) on the same GGUF and the same prompt token ids as
`quorum-bench-runtime`: single-stream prefill and greedy decode speed, medians of N runs.

    quorum-bench-runtime --write-prompt-ids /tmp/prompt.json
    python3 benches/llamacpp_bench.py MODEL.gguf /tmp/prompt.json [runs] [new_tokens] [threads]
"""
import json
import statistics
import sys
import time

from llama_cpp import Llama

model, prompt_file = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
new_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 64
threads = int(sys.argv[5]) if len(sys.argv) > 5 else 2
ids = json.load(open(prompt_file))
llm = Llama(model_path=model, n_ctx=len(ids) + new_tokens + 8, n_threads=threads,
            n_threads_batch=threads, n_batch=512, verbose=False)
prefill, decode = [], []
for _ in range(runs):
    llm.reset()
    start = time.perf_counter()
    llm.eval(ids)
    token = llm.sample(temp=0.0)
    prefill.append(len(ids) / (time.perf_counter() - start))
    start = time.perf_counter()
    for _ in range(new_tokens - 1):
        llm.eval([token])
        token = llm.sample(temp=0.0)
    decode.append((new_tokens - 1) / (time.perf_counter() - start))
print(json.dumps({"config": "llama.cpp", "prompt_tokens": len(ids), "runs": runs,
                  "threads": threads, "prefill_tok_s": statistics.median(prefill),
                  "decode_tok_s": statistics.median(decode)}))
