"""What each surface adds to a text-to-SQL answer: the same question asked of the whole pipeline
through gRPC (`Text2Sql.Generate`, quorum_client), HTTP (`POST /v1/sql`) and MCP (the `ask` tool
over streamable HTTP at /mcp, the official `mcp` client), in turn, on one running server; the
order rotates each round so that none always follows another. Asserts the three answer the same
SQL, and prints each surface's median and spread and its median paired difference from gRPC.

Usage: python surface_overhead_bench.py HTTP_BASE GRPC_TARGET TOKEN DB_ID QUESTION [ROUNDS]
"""

import asyncio
import json
import statistics
import sys
import time
import urllib.request

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from quorum_client import Client

http_base, grpc_target, token, db_id, question = sys.argv[1:6]
rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 10
WARMUP = 2  # the first rounds fill the prefix cache


def structured(result) -> dict:
    value = getattr(result, "structured_content", None)
    return getattr(result, "structuredContent", None) if value is None else value


def ask_http() -> str:
    request = urllib.request.Request(
        f"{http_base}/v1/sql", method="POST",
        data=json.dumps({"db_id": db_id, "question": question}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.load(reply)["sql"]


async def main() -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with Client(grpc_target, token=token) as grpc_client:
        grpc_client.wait_ready()
        async with create_mcp_http_client(headers=headers) as http_client:
            async with streamable_http_client(f"{http_base}/mcp", http_client=http_client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

                    async def ask_mcp() -> str:
                        result = await session.call_tool("ask", {"db_id": db_id, "question": question})
                        return structured(result)["sql"]

                    async def ask_grpc() -> str:
                        return grpc_client.ask(db_id, question).sql

                    async def ask_over_http() -> str:
                        return ask_http()

                    surfaces = [("grpc", ask_grpc), ("http", ask_over_http), ("mcp", ask_mcp)]
                    times = {name: [] for name, _ in surfaces}
                    answers = set()
                    for i in range(rounds + WARMUP):
                        order = surfaces[i % 3:] + surfaces[:i % 3]
                        for name, ask in order:
                            started = time.perf_counter()
                            answers.add(await ask())
                            elapsed = time.perf_counter() - started
                            if i >= WARMUP:
                                times[name].append(elapsed)
    assert len(answers) == 1, answers
    print(f"{db_id}: {question!r} -> {answers.pop()!r}, {rounds} rounds after {WARMUP} to warm up")
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values) * 1e3:.1f} ms, "
              f"min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f}")
    for name in ("http", "mcp"):
        diff = statistics.median(s - g for g, s in zip(times["grpc"], times[name]))
        print(f"{name} - grpc, median of paired differences: {diff * 1e3:+.1f} ms")


asyncio.run(main())
