"""The gRPC client: `Client`, a small typed wrapper over Quorum's gRPC services.

    from quorum_client import Client
    with Client("127.0.0.1:50051", token="s3cret") as quorum:
        answer = quorum.ask("concert_singer", "How many singers do we have?")
        print(answer.sql, [c.model for c in answer.candidates])

Every method returns the generated protobuf messages (`quorum_client.pb`), so nothing the
server says is lost in translation; `query` and `rows` give result rows as Python values
(`Rows`: tuples, dicts, a pandas DataFrame). A server that is busy answers RESOURCE_EXHAUSTED with a
`grpc-retry-pushback-ms` trailer; the client waits that long and tries again, up to `retries`
times, before it raises. Streaming calls are retried only when the refusal comes before the
first message, so a retry never repeats a message the caller has seen.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Optional

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .errors import DEFAULT_PUSHBACK_S, QuorumError, from_rpc_error
from .methods import Call, Methods, wait_until_serving
from ._proto.quorum.v1 import databases_pb2_grpc, inference_pb2_grpc, text2sql_pb2_grpc

#: The generated stub of each service.
STUBS = {
    "Text2Sql": text2sql_pb2_grpc.Text2SqlStub,
    "Inference": inference_pb2_grpc.InferenceStub,
    "Databases": databases_pb2_grpc.DatabasesStub,
}


def channel_of(module, target: str, tls: bool, root_certificates: Optional[bytes]):
    """A channel of `module` (`grpc` or `grpc.aio`) to `target`."""
    if tls:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        return module.secure_channel(target, credentials)
    return module.insecure_channel(target)


class Client(Methods):
    """A connection to one Quorum server over gRPC.

    `target` is `host:port`; `token` the server's bearer token, if it has one; `tls` with
    `root_certificates` (PEM bytes, or None for the system's) connects over TLS. `timeout` is
    each call's deadline in seconds unless the call gives its own; `retries` how many times a
    RESOURCE_EXHAUSTED call is tried again after the server's pushback.
    """

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
        self._channel = channel_of(grpc, target, tls, root_certificates)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.retries = retries
        #: Retries made so far after RESOURCE_EXHAUSTED (for logs and tests).
        self.retries_made = 0
        self._stubs = {name: stub(self._channel) for name, stub in STUBS.items()}
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _method(self, call: Call) -> Callable:
        return getattr(self._stubs[call.service], call.method)

    # The retry loops.

    def _unary(self, call: Call, timeout: Optional[float], then: Optional[Callable[[Any], Any]] = None) -> Any:
        method = self._method(call)
        attempt = 0
        while True:
            try:
                answer = method(call.request, timeout=timeout or self.timeout, metadata=self._metadata)
                return then(answer) if then else answer
            except grpc.RpcError as e:
                error = from_rpc_error(e)
                if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                time.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    def _stream(self, call: Call, timeout: Optional[float]) -> Iterator[Any]:
        method = self._method(call)
        attempt = 0
        while True:
            started = False
            try:
                for message in method(call.request, timeout=timeout or self.timeout, metadata=self._metadata):
                    started = True
                    yield message
                return
            except grpc.RpcError as e:
                error = from_rpc_error(e)
                if started or error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                time.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    def generate(self, prompt: Optional[str] = None, **kwargs) -> str:
        """The text of the first choice of a completion (see `generate_stream`)."""
        return "".join(m.text for m in self.generate_stream(prompt, **kwargs) if m.index == 0)

    # Health.

    def health(self, service: str = "", *, timeout: float = 5.0) -> str:
        """`SERVING` or `NOT_SERVING` for `service` ("" is the server's readiness)."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            status = self._health.Check(request, timeout=timeout).status
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(status)

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Returns once the server reports SERVING; raises TimeoutError after `timeout`."""
        wait_until_serving(self.health, timeout)


__all__ = ["Client", "QuorumError"]
