"""A small typed wrapper over Quorum's gRPC services.

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
from typing import Callable, Iterator, Optional, Sequence, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .rows import Rows
from ._proto.quorum.v1 import (
    databases_pb2,
    databases_pb2_grpc,
    inference_pb2,
    inference_pb2_grpc,
    text2sql_pb2,
    text2sql_pb2_grpc,
)

T = TypeVar("T")

#: The trailer a busy server sends with RESOURCE_EXHAUSTED: how long to wait, in milliseconds.
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


def _pushback_s(error: grpc.RpcError) -> Optional[float]:
    for key, value in error.trailing_metadata() or ():
        if key == PUSHBACK_KEY:
            try:
                return int(value) / 1000.0
            except ValueError:
                return None
    return None


def _error(error: grpc.RpcError) -> QuorumError:
    pushback = _pushback_s(error) if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
    return QuorumError(error.code(), error.details() or "", pushback)


class Client:
    """A connection to one Quorum server.

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
        if tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(target, credentials)
        else:
            self._channel = grpc.insecure_channel(target)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.retries = retries
        #: Retries made so far after RESOURCE_EXHAUSTED (for logs and tests).
        self.retries_made = 0
        self._text2sql = text2sql_pb2_grpc.Text2SqlStub(self._channel)
        self._inference = inference_pb2_grpc.InferenceStub(self._channel)
        self._databases = databases_pb2_grpc.DatabasesStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The retry loops.

    def _unary(self, method: Callable[..., T], request: object, timeout: Optional[float]) -> T:
        attempt = 0
        while True:
            try:
                return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error = _error(e)
                if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                time.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    def _stream(self, method: Callable[..., Iterator[T]], request: object, timeout: Optional[float]) -> Iterator[T]:
        attempt = 0
        while True:
            started = False
            try:
                for message in method(request, timeout=timeout or self.timeout, metadata=self._metadata):
                    started = True
                    yield message
                return
            except grpc.RpcError as e:
                error = _error(e)
                if started or error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or attempt >= self.retries:
                    raise error from None
                attempt += 1
                self.retries_made += 1
                time.sleep(error.pushback_s or DEFAULT_PUSHBACK_S)

    # Text2Sql.

    def ask(
        self,
        db_id: str,
        question: str,
        *,
        evidence: Optional[str] = None,
        options: Optional[text2sql_pb2.PipelineOptions] = None,
        timeout: Optional[float] = None,
    ) -> text2sql_pb2.Text2SqlResponse:
        """The SQL for `question` over `db_id`, with the evidence behind it."""
        request = text2sql_pb2.Text2SqlRequest(question=question, db_id=db_id, evidence=evidence, options=options)
        return self._unary(self._text2sql.Generate, request, timeout)

    def ask_stream(
        self,
        db_id: str,
        question: str,
        *,
        evidence: Optional[str] = None,
        options: Optional[text2sql_pb2.PipelineOptions] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[text2sql_pb2.Text2SqlEvent]:
        """The pipeline's stages as they happen; the last event carries the answer."""
        request = text2sql_pb2.Text2SqlRequest(question=question, db_id=db_id, evidence=evidence, options=options)
        return self._stream(self._text2sql.GenerateStream, request, timeout)

    def link_schema(self, db_id: str, question: str, *, timeout: Optional[float] = None) -> text2sql_pb2.LinkSchemaResponse:
        """The tables a query for `question` needs."""
        request = text2sql_pb2.LinkSchemaRequest(question=question, db_id=db_id)
        return self._unary(self._text2sql.LinkSchema, request, timeout)

    def explain(
        self, db_id: str, sql: str, *, question: Optional[str] = None, timeout: Optional[float] = None
    ) -> text2sql_pb2.ExplainResponse:
        """`sql` in words, checked against `question` when given."""
        request = text2sql_pb2.ExplainRequest(sql=sql, db_id=db_id, question=question)
        return self._unary(self._text2sql.Explain, request, timeout)

    def debug(
        self, db_id: str, question: str, sql: str, *, timeout: Optional[float] = None
    ) -> text2sql_pb2.DebugResponse:
        """A fix for a failing or wrong `sql`."""
        request = text2sql_pb2.DebugRequest(question=question, db_id=db_id, sql=sql)
        return self._unary(self._text2sql.Debug, request, timeout)

    def optimize(
        self, db_id: str, sql: str, *, question: Optional[str] = None, timeout: Optional[float] = None
    ) -> text2sql_pb2.OptimizeResponse:
        """A faster rewrite of `sql`, measured on the database."""
        request = text2sql_pb2.OptimizeRequest(sql=sql, db_id=db_id, question=question)
        return self._unary(self._text2sql.Optimize, request, timeout)

    # Inference.

    def generate_stream(
        self,
        prompt: Optional[str] = None,
        *,
        messages: Optional[Sequence[tuple[str, str]]] = None,
        model: str = "",
        adapter: Optional[str] = None,
        sampling: Optional[inference_pb2.SamplingOptions] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[inference_pb2.InferenceResponse]:
        """Streams a completion of `prompt`, or of chat `messages` as (role, content) pairs."""
        if (prompt is None) == (messages is None):
            raise ValueError("give exactly one of prompt and messages")
        request = inference_pb2.InferenceRequest(model=model, adapter=adapter, sampling=sampling)
        if prompt is not None:
            request.prompt = prompt
        else:
            request.chat.CopyFrom(
                inference_pb2.ChatMessages(
                    messages=[inference_pb2.ChatMessage(role=r, content=c) for r, c in messages or ()]
                )
            )
        return self._stream(self._inference.Generate, request, timeout)

    def generate(self, prompt: Optional[str] = None, **kwargs) -> str:
        """The text of the first choice of a completion (see `generate_stream`)."""
        return "".join(m.text for m in self.generate_stream(prompt, **kwargs) if m.index == 0)

    def tokenize(self, text: str, *, model: str = "", timeout: Optional[float] = None) -> inference_pb2.TokenizeResponse:
        request = inference_pb2.TokenizeRequest(model=model, text=text)
        return self._unary(self._inference.Tokenize, request, timeout)

    def list_models(self, *, timeout: Optional[float] = None) -> inference_pb2.ListModelsResponse:
        return self._unary(self._inference.ListModels, inference_pb2.ListModelsRequest(), timeout)

    def load_adapter(self, model: str, name: str, path: str, *, timeout: Optional[float] = None) -> inference_pb2.AdapterList:
        request = inference_pb2.LoadAdapterRequest(model=model, name=name, path=path)
        return self._unary(self._inference.LoadAdapter, request, timeout)

    def unload_adapter(self, model: str, name: str, *, timeout: Optional[float] = None) -> inference_pb2.AdapterList:
        request = inference_pb2.UnloadAdapterRequest(model=model, name=name)
        return self._unary(self._inference.UnloadAdapter, request, timeout)

    # Databases.

    def list_databases(self, *, timeout: Optional[float] = None) -> databases_pb2.ListDatabasesResponse:
        return self._unary(self._databases.List, databases_pb2.ListDatabasesRequest(), timeout)

    def describe(self, db_id: str, *, timeout: Optional[float] = None) -> databases_pb2.DescribeDatabaseResponse:
        return self._unary(self._databases.Describe, databases_pb2.DescribeDatabaseRequest(db_id=db_id), timeout)

    def query(self, db_id: str, sql: str, *, timeout: Optional[float] = None) -> Rows:
        """Runs one read-only query (the server's guard and limits apply) and returns its rows."""
        request = databases_pb2.QueryRequest(db_id=db_id, sql=sql)
        return Rows.of(self._unary(self._databases.Query, request, timeout).result)

    @staticmethod
    def rows(answer: text2sql_pb2.Text2SqlResponse) -> Rows:
        """The rows of an answer's SQL (`ask`'s preview) as Python values."""
        return Rows.of(answer.preview)

    def register(self, db_id: str, path: str, *, timeout: Optional[float] = None) -> databases_pb2.RegisterDatabaseResponse:
        """Registers an SQLite file under the server's allowed directory."""
        request = databases_pb2.RegisterDatabaseRequest(db_id=db_id, path=path)
        return self._unary(self._databases.Register, request, timeout)

    def notes(self, db_id: str, *, timeout: Optional[float] = None) -> databases_pb2.ListNotesResponse:
        """The database's notes (definitions, units, rules every question over it is told)."""
        return self._unary(self._databases.ListNotes, databases_pb2.ListNotesRequest(db_id=db_id), timeout)

    def add_note(self, db_id: str, text: str, *, timeout: Optional[float] = None) -> databases_pb2.Note:
        return self._unary(self._databases.AddNote, databases_pb2.AddNoteRequest(db_id=db_id, text=text), timeout)

    def edit_note(self, db_id: str, note_id: int, text: str, *, timeout: Optional[float] = None) -> databases_pb2.Note:
        request = databases_pb2.EditNoteRequest(db_id=db_id, id=note_id, text=text)
        return self._unary(self._databases.EditNote, request, timeout)

    def remove_note(self, db_id: str, note_id: int, *, timeout: Optional[float] = None) -> databases_pb2.ListNotesResponse:
        request = databases_pb2.RemoveNoteRequest(db_id=db_id, id=note_id)
        return self._unary(self._databases.RemoveNote, request, timeout)

    # Health.

    def health(self, service: str = "", *, timeout: float = 5.0) -> str:
        """`SERVING` or `NOT_SERVING` for `service` ("" is the server's readiness)."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            status = self._health.Check(request, timeout=timeout).status
        except grpc.RpcError as e:
            raise _error(e) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(status)

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Returns once the server reports SERVING; raises TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.health() == "SERVING":
                    return
            except QuorumError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server was not ready within {timeout} s")
            time.sleep(0.2)


__all__ = ["Client", "QuorumError"]
