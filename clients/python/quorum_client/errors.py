"""The one error every client raises: a call the server refused or that failed, with its gRPC
status code whichever transport carried it (over HTTP the error body's `grpc_code`)."""

from typing import Optional

import grpc

#: The trailer (gRPC) or header (HTTP) a busy server sends with RESOURCE_EXHAUSTED: how long
#: to wait, in milliseconds.
PUSHBACK_KEY = "grpc-retry-pushback-ms"
#: How long to wait when a busy server names no pushback.
DEFAULT_PUSHBACK_S = 1.0


class QuorumError(Exception):
    """A call the server refused or that failed; `code` is the gRPC status code."""

    def __init__(self, code: grpc.StatusCode, message: str, pushback_s: Optional[float] = None):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        #: The server's retry pushback in seconds (RESOURCE_EXHAUSTED only).
        self.pushback_s = pushback_s


def pushback_s(value: Optional[str]) -> Optional[float]:
    """A pushback in milliseconds, as sent, in seconds; None when absent or unreadable."""
    try:
        return int(value) / 1000.0 if value is not None else None
    except ValueError:
        return None


def from_rpc_error(error: grpc.RpcError) -> QuorumError:
    """The QuorumError of a failed gRPC call (sync or asyncio)."""
    code = error.code()
    pushback = None
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        trailers = dict(error.trailing_metadata() or ())
        pushback = pushback_s(trailers.get(PUSHBACK_KEY))
    return QuorumError(code, error.details() or "", pushback)
