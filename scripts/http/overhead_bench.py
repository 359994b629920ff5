"""What the HTTP face adds to a request: the same greedy 32-token completion asked through the
gRPC API (quorum_client) and through /v1/chat/completions (the openai client), alternated, on one
server; prints the median and spread of each and their difference.

Usage: python overhead_bench.py GRPC_TARGET HTTP_BASE_URL TOKEN MODEL [ROUNDS]
"""

import statistics
import sys
import time

import openai

from quorum_client import Client, pb

target, base_url, token, model = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 20
question = "Write SQL that lists the names of all singers older than 40."
http = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0)
sampling = pb.inference_pb2.SamplingOptions(temperature=0.0, max_tokens=32, ignore_eos=True)
with Client(target, token=token) as grpc_client:
    grpc_client.wait_ready()
    times = {"grpc": [], "http": []}
    for i in range(rounds + 2):
        started = time.perf_counter()
        text = grpc_client.generate(messages=[("user", question)], model=model, sampling=sampling)
        grpc_s = time.perf_counter() - started
        started = time.perf_counter()
        reply = http.chat.completions.create(
            model=model, messages=[{"role": "user", "content": question}], temperature=0,
            max_tokens=32, extra_body={"ignore_eos": True})
        http_s = time.perf_counter() - started
        assert reply.choices[0].message.content == text, (reply.choices[0].message.content, text)
        if i >= 2:  # the first rounds warm the prefix cache
            times["grpc"].append(grpc_s)
            times["http"].append(http_s)
for name, values in times.items():
    print(f"{name}: median {statistics.median(values) * 1e3:.1f} ms, "
          f"min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f} over {len(values)} requests")
diff = statistics.median(h - g for g, h in zip(times["grpc"], times["http"]))
print(f"http - grpc, median of paired differences: {diff * 1e3:+.1f} ms")
