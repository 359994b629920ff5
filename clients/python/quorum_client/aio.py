"""The asyncio client: `AsyncClient`, the same calls as `Client` over gRPC's asyncio API.

    import asyncio
    from quorum_client import AsyncClient

    async def main():
        async with AsyncClient("127.0.0.1:50051") as quorum:
            answer = await quorum.ask("concert_singer", "How many singers do we have?")
            async for event in quorum.ask_stream("concert_singer", "List the singers."):
                print(event.WhichOneof("event"))

    asyncio.run(main())

Each unary method is a coroutine and each streaming one an async iterator; the retries after
the server's pushback are those of `Client`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Callable, Optional

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .client import STUBS, channel_of
from .errors import DEFAULT_PUSHBACK_S, QuorumError, from_rpc_error
from .methods import Call, Methods


class AsyncClient(Methods):
    """A connection to one Quorum server over gRPC, for asyncio (arguments as `Client`'s)."""

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        token: Optional[str] = None,
        *,
        tls: bool = False,
        root_certificates: Optional[bytes] = None,
        timeout: float = 300.0,
        retries: int = 3,
    ) -> None:
        self._channel = channel_of(grpc.aio, target, tls, root_certificates)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.retries = retries
        self.retries_made = 0
        self._stubs = {name: stub(self._channel) for name, stub in STUBS.items()}
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _method(self, call: Call) -> Callable:
        return getattr(self._stubs[call.service], call.method)

    async def _unary(self, call: Call, timeout: Optional[float], then: Optional[Callable[[Any], Any]] = None) -> Any:
        method = self._method(call)
        attempt = 0
        while True:
            try:
                answer = await method(call.request, timeout=timeout or self.timeout, metadata=self._metadata)
                return then(answer) if then else answer
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                await asyncio.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    async def _stream(self, call: Call, timeout: Optional[float]) -> AsyncIterator[Any]:
        method = self._method(call)
        attempt = 0
        while True:
            started = False
            try:
                async for message in method(call.request, timeout=timeout or self.timeout, metadata=self._metadata):
                    started = True
                    yield message
                return
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                if started or error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                await asyncio.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    async def generate(self, prompt: Optional[str] = None, **kwargs) -> str:
        """The text of the first choice of a completion (see `generate_stream`)."""
        return "".join([m.text async for m in self.generate_stream(prompt, **kwargs) if m.index == 0])

    async def health(self, service: str = "", *, timeout: float = 5.0) -> str:
        """`SERVING` or `NOT_SERVING` for `service` ("" is the server's readiness)."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            status = (await self._health.Check(request, timeout=timeout)).status
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(status)

    async def wait_ready(self, timeout: float = 300.0) -> None:
        """Returns once the server reports SERVING; raises TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if await self.health() == "SERVING":
                    return
            except QuorumError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server was not ready within {timeout} s")
            await asyncio.sleep(0.2)
