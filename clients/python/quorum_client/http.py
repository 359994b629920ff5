"""The HTTP client: `HttpClient`, the same calls as `Client` over Quorum's HTTP API (`/v1/sql`,
its sub-tasks and `/v1/databases`), for where only HTTP reaches the server (a proxy, a
firewall, a notebook without gRPC). It needs nothing beyond the standard library and the
package's own messages.

    from quorum_client import HttpClient
    with HttpClient("http://127.0.0.1:9464", token="s3cret") as quorum:
        answer = quorum.ask("concert_singer", "How many singers do we have?")
        print(answer.sql, quorum.rows(answer).rows)

Answers are the same protobuf messages `Client` returns (read from the API's JSON, whose
plain cells and rows are turned back into `Value`s and `Row`s), and errors the same
`QuorumError` with the gRPC status code the server names (`grpc_code`). A busy server's 429 is
retried after its pushback, as over gRPC. The raw-model calls of `Inference` (`generate`,
`tokenize`, adapters) have no route here: they raise UNIMPLEMENTED (the OpenAI API serves the
raw models over HTTP).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator, Optional

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from .errors import DEFAULT_PUSHBACK_S, PUSHBACK_KEY, QuorumError, pushback_s
from .methods import Call, Methods, wait_until_serving


def _tagged_cell(value: Any) -> dict:
    """A plain JSON cell as the proto3 JSON of `Value`."""
    if value is None:
        return {"null": True}
    if isinstance(value, bool):
        raise ValueError(f"a cell is never a boolean: {value!r}")
    if isinstance(value, int):
        return {"integer": str(value)}
    if isinstance(value, float):
        return {"real": value}
    return {"text": value}


def to_proto_json(value: Any, descriptor: Descriptor) -> Any:
    """The API's JSON for a message of `descriptor` as the proto3 JSON mapping reads it: plain
    cells back to `Value`s and rows (arrays) back to `Row`s, wherever the message has them."""
    if descriptor.full_name == "quorum.v1.Value":
        return _tagged_cell(value)
    if descriptor.full_name == "quorum.v1.Row":
        return {"values": [_tagged_cell(v) for v in value]}
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for f in descriptor.fields:
        if f.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        for name in dict.fromkeys((f.json_name, f.name)):
            if name in out and out[name] is not None:
                if f.is_repeated:
                    out[name] = [to_proto_json(v, f.message_type) for v in out[name]]
                else:
                    out[name] = to_proto_json(out[name], f.message_type)
    return out


def parse(value: Any, cls: type) -> Any:
    """A message of `cls` from the API's JSON; fields a newer server added are skipped."""
    return json_format.ParseDict(to_proto_json(value, cls.DESCRIPTOR), cls(), ignore_unknown_fields=True)


def _error(status: int, body: bytes, headers) -> QuorumError:
    try:
        error = json.loads(body)["error"]
        code = grpc.StatusCode[error["grpc_code"]]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        code, message = grpc.StatusCode.UNKNOWN, f"HTTP {status}: {body[:300]!r}"
    pushback = None
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        pushback = pushback_s(headers.get(PUSHBACK_KEY))
    return QuorumError(code, message, pushback)


class HttpClient(Methods):
    """A connection to one Quorum server's HTTP port (`base_url`, e.g. `http://127.0.0.1:9464`);
    `token`, `timeout` and `retries` as `Client`'s."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:9464",
        token: Optional[str] = None,
        *,
        timeout: float = 300.0,
        retries: int = 3,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"content-type": "application/json"}
        if token:
            self._headers["authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self.retries = retries
        self.retries_made = 0

    def close(self) -> None:
        """Nothing to release: each call opens its own connection."""

    def __enter__(self) -> "HttpClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, call: Call, timeout: Optional[float], stream: bool):
        """The response of `call`, after the retries a busy server asks for."""
        if call.http_path is None:
            raise QuorumError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{call.service}.{call.method} has no HTTP route: use Client (gRPC), or the OpenAI API for raw models",
            )
        body = None
        if call.http_method not in ("GET", "DELETE"):
            payload = call.http_body if call.http_body is not None else json_format.MessageToDict(call.request)
            body = json.dumps(payload).encode()
        headers = dict(self._headers)
        if stream:
            headers["accept"] = "text/event-stream"
        attempt = 0
        while True:
            request = urllib.request.Request(
                self.base_url + call.http_path, data=body, headers=headers, method=call.http_method
            )
            try:
                return urllib.request.urlopen(request, timeout=timeout or self.timeout)
            except urllib.error.HTTPError as e:
                error = _error(e.code, e.read(), e.headers)
                if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                time.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)
            except urllib.error.URLError as e:
                raise QuorumError(grpc.StatusCode.UNAVAILABLE, str(e.reason)) from None

    def _unary(self, call: Call, timeout: Optional[float], then: Optional[Callable[[Any], Any]] = None) -> Any:
        with self._open(call, timeout, stream=False) as response:
            answer = parse(json.load(response), call.response)
        return then(answer) if then else answer

    def _stream(self, call: Call, timeout: Optional[float]) -> Iterator[Any]:
        """Each server-sent event as the stream's message: the event names the message's field."""
        fields = {f.name: f for f in call.response.DESCRIPTOR.fields}
        with self._open(call, timeout, stream=True) as response:
            name = None
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[len("event:"):].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[len("data:"):])
                    if name == "error":
                        raise _error(0, json.dumps(data).encode(), {})
                    if name in fields:
                        yield parse({fields[name].json_name: data}, call.response)
                elif not line:
                    name = None

    def health(self, service: str = "", *, timeout: float = 5.0) -> str:
        """`SERVING` or `NOT_SERVING` for the server's readiness (`/ready`; HTTP has no other
        service's entry)."""
        if service:
            raise QuorumError(grpc.StatusCode.UNIMPLEMENTED, "over HTTP only the server's readiness is reported")
        try:
            with urllib.request.urlopen(self.base_url + "/ready", timeout=timeout):
                return "SERVING"
        except urllib.error.HTTPError:
            return "NOT_SERVING"
        except urllib.error.URLError as e:
            raise QuorumError(grpc.StatusCode.UNAVAILABLE, str(e.reason)) from None

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Returns once the server is ready; raises TimeoutError after `timeout`."""
        wait_until_serving(self.health, timeout)
