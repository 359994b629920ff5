"""The MCP server checked with the official Python MCP client (`mcp` on PyPI) against a live
`quorum serve` (started by scripts/http_api_test.sh), over both transports: streamable HTTP at
/mcp with the bearer token, and stdio through `quorum mcp` talking to the server's gRPC port.
On each: the tools are listed, "How many singers do we have?" on concert_singer answers 6, a
write through run_query is refused and changes nothing, and (over HTTP) a call without the
token is refused.

Usage: python mcp_check.py HTTP_BASE GRPC_TARGET TOKEN QUORUM_BINARY DATABASE_FILE
"""

import asyncio
import hashlib
import sys
import urllib.error
import urllib.request

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

http_base, grpc_target, token, binary, database = sys.argv[1:6]
TOOLS = ["ask", "describe_database", "explain_query", "list_databases", "run_query"]


def failed(result) -> bool:
    """Whether a tool call failed (the client names the field `is_error`, 1.x `isError`)."""
    value = getattr(result, "is_error", None)
    return bool(getattr(result, "isError", False) if value is None else value)


def structured(result) -> dict:
    value = getattr(result, "structured_content", None)
    return getattr(result, "structuredContent", None) if value is None else value


def digest(path: str) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


async def check(session: ClientSession, transport: str) -> None:
    await session.initialize()
    tools = sorted(t.name for t in (await session.list_tools()).tools)
    assert tools == TOOLS, tools
    listed = await session.call_tool("list_databases", {})
    assert not failed(listed) and structured(listed)["databases"][0]["db_id"] == "concert_singer", listed
    asked = await session.call_tool("ask", {"db_id": "concert_singer", "question": "How many singers do we have?"})
    assert not failed(asked), asked
    answer = structured(asked)
    assert answer["result"]["rows"] == [[6]], answer
    before = digest(database)
    refused = await session.call_tool("run_query", {"db_id": "concert_singer", "sql": "DELETE FROM singer"})
    assert failed(refused) and "INVALID_ARGUMENT" in refused.content[0].text, refused
    assert digest(database) == before, "the database changed"
    print(f"mcp over {transport}: {len(tools)} tools; ask: {answer['sql']!r} -> 6; a DELETE refused, nothing changed")


async def main() -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(f"{http_base}/mcp", http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await check(session, "streamable HTTP")
    try:
        async with create_mcp_http_client() as client:
            async with streamable_http_client(f"{http_base}/mcp", http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), timeout=30)
        raise AssertionError("an MCP session without the token was accepted")
    except AssertionError:
        raise
    except BaseException as e:  # the client reports the refusal as its own error type
        # What the server answered, seen without the client's wrapping.
        request = urllib.request.Request(
            f"{http_base}/mcp", method="POST", data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        try:
            urllib.request.urlopen(request, timeout=30)
            raise AssertionError("POST /mcp without the token was answered")
        except urllib.error.HTTPError as http_error:
            assert http_error.code == 401, http_error.code
        print(f"mcp over streamable HTTP without the token: refused (401; the client raised {type(e).__name__})")
    params = StdioServerParameters(
        command=binary, args=["mcp", "--server", f"http://{grpc_target}"],
        env={"QUORUM_AUTH_TOKEN": token},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await check(session, "stdio (quorum mcp)")
    print("mcp client check: OK")


asyncio.run(main())
