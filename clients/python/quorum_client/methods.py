"""What each client can ask, written once for every transport.

A method builds its request and names the call (the gRPC service and method, the HTTP route
and body); the transport (`Client` over gRPC, `AsyncClient` over gRPC's asyncio API,
`HttpClient` over HTTP) makes it. A transport's `_unary` returns the answer (or, in the
asyncio client, a coroutine of it) and its `_stream` an iterator (or an async iterator) of the
stream's messages; `then` turns an answer into what the method promises (`query`'s `Rows`).
"""

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence
from urllib.parse import quote

from .errors import QuorumError
from .rows import Rows
from ._proto.quorum.v1 import databases_pb2, inference_pb2, text2sql_pb2


@dataclass(frozen=True)
class Call:
    """One RPC, as each transport makes it."""

    #: The gRPC service (`Text2Sql`, `Databases`, `Inference`) and method.
    service: str
    method: str
    request: Any
    #: The message the call answers (a stream's message, for streams).
    response: type
    #: The HTTP method and route; None where the HTTP face has no route for the call.
    http_method: Optional[str] = None
    http_path: Optional[str] = None
    #: The HTTP body when it is not the request itself (routes that take the id in the path).
    http_body: Optional[dict] = field(default=None)


def wait_until_serving(health: Callable[[], str], timeout: float) -> None:
    """Polls `health` until it says SERVING; raises TimeoutError after `timeout` seconds. A
    refusal while the server starts counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if health() == "SERVING":
                return
        except QuorumError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server was not ready within {timeout} s")
        time.sleep(0.2)


def _db(db_id: str) -> str:
    return quote(db_id, safe="")


class Methods:
    """The calls every client offers."""

    def _unary(self, call: Call, timeout: Optional[float], then: Optional[Callable[[Any], Any]] = None) -> Any:
        raise NotImplementedError

    def _stream(self, call: Call, timeout: Optional[float]) -> Any:
        raise NotImplementedError

    # Text2Sql.

    def ask(
        self,
        db_id: str,
        question: str,
        *,
        evidence: Optional[str] = None,
        options: Optional[text2sql_pb2.PipelineOptions] = None,
        timeout: Optional[float] = None,
    ):
        """The SQL for `question` over `db_id`, with the evidence behind it (`Text2SqlResponse`)."""
        request = text2sql_pb2.Text2SqlRequest(question=question, db_id=db_id, evidence=evidence, options=options)
        return self._unary(
            Call("Text2Sql", "Generate", request, text2sql_pb2.Text2SqlResponse, "POST", "/v1/sql"), timeout
        )

    def ask_stream(
        self,
        db_id: str,
        question: str,
        *,
        evidence: Optional[str] = None,
        options: Optional[text2sql_pb2.PipelineOptions] = None,
        timeout: Optional[float] = None,
    ):
        """The pipeline's stages as they happen (`Text2SqlEvent`s); the last carries the answer."""
        request = text2sql_pb2.Text2SqlRequest(question=question, db_id=db_id, evidence=evidence, options=options)
        return self._stream(
            Call("Text2Sql", "GenerateStream", request, text2sql_pb2.Text2SqlEvent, "POST", "/v1/sql"), timeout
        )

    def link_schema(self, db_id: str, question: str, *, timeout: Optional[float] = None):
        """The tables a query for `question` needs (`LinkSchemaResponse`)."""
        request = text2sql_pb2.LinkSchemaRequest(question=question, db_id=db_id)
        return self._unary(
            Call("Text2Sql", "LinkSchema", request, text2sql_pb2.LinkSchemaResponse, "POST", "/v1/sql/link"), timeout
        )

    def explain(self, db_id: str, sql: str, *, question: Optional[str] = None, timeout: Optional[float] = None):
        """`sql` in words, checked against `question` when given (`ExplainResponse`)."""
        request = text2sql_pb2.ExplainRequest(sql=sql, db_id=db_id, question=question)
        return self._unary(
            Call("Text2Sql", "Explain", request, text2sql_pb2.ExplainResponse, "POST", "/v1/sql/explain"), timeout
        )

    def debug(self, db_id: str, question: str, sql: str, *, timeout: Optional[float] = None):
        """A fix for a failing or wrong `sql` (`DebugResponse`)."""
        request = text2sql_pb2.DebugRequest(question=question, db_id=db_id, sql=sql)
        return self._unary(
            Call("Text2Sql", "Debug", request, text2sql_pb2.DebugResponse, "POST", "/v1/sql/debug"), timeout
        )

    def optimize(self, db_id: str, sql: str, *, question: Optional[str] = None, timeout: Optional[float] = None):
        """A faster rewrite of `sql`, measured on the database (`OptimizeResponse`)."""
        request = text2sql_pb2.OptimizeRequest(sql=sql, db_id=db_id, question=question)
        return self._unary(
            Call("Text2Sql", "Optimize", request, text2sql_pb2.OptimizeResponse, "POST", "/v1/sql/optimize"), timeout
        )

    # Inference (gRPC only: over HTTP the raw models are the OpenAI API's).

    def generate_stream(
        self,
        prompt: Optional[str] = None,
        *,
        messages: Optional[Sequence[tuple]] = None,
        model: str = "",
        adapter: Optional[str] = None,
        sampling: Optional[inference_pb2.SamplingOptions] = None,
        timeout: Optional[float] = None,
    ):
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
        return self._stream(Call("Inference", "Generate", request, inference_pb2.InferenceResponse), timeout)

    def tokenize(self, text: str, *, model: str = "", timeout: Optional[float] = None):
        request = inference_pb2.TokenizeRequest(model=model, text=text)
        return self._unary(Call("Inference", "Tokenize", request, inference_pb2.TokenizeResponse), timeout)

    def list_models(self, *, timeout: Optional[float] = None):
        request = inference_pb2.ListModelsRequest()
        return self._unary(Call("Inference", "ListModels", request, inference_pb2.ListModelsResponse), timeout)

    def load_adapter(self, model: str, name: str, path: str, *, timeout: Optional[float] = None):
        request = inference_pb2.LoadAdapterRequest(model=model, name=name, path=path)
        return self._unary(Call("Inference", "LoadAdapter", request, inference_pb2.AdapterList), timeout)

    def unload_adapter(self, model: str, name: str, *, timeout: Optional[float] = None):
        request = inference_pb2.UnloadAdapterRequest(model=model, name=name)
        return self._unary(Call("Inference", "UnloadAdapter", request, inference_pb2.AdapterList), timeout)

    # Databases.

    def list_databases(self, *, timeout: Optional[float] = None):
        request = databases_pb2.ListDatabasesRequest()
        return self._unary(
            Call("Databases", "List", request, databases_pb2.ListDatabasesResponse, "GET", "/v1/databases"), timeout
        )

    def describe(self, db_id: str, *, timeout: Optional[float] = None):
        request = databases_pb2.DescribeDatabaseRequest(db_id=db_id)
        path = f"/v1/databases/{_db(db_id)}"
        return self._unary(
            Call("Databases", "Describe", request, databases_pb2.DescribeDatabaseResponse, "GET", path), timeout
        )

    def query(self, db_id: str, sql: str, *, timeout: Optional[float] = None):
        """Runs one read-only query (the server's guard and limits apply) and returns its `Rows`."""
        request = databases_pb2.QueryRequest(db_id=db_id, sql=sql)
        path = f"/v1/databases/{_db(db_id)}/query"
        call = Call("Databases", "Query", request, databases_pb2.QueryResponse, "POST", path, {"sql": sql})
        return self._unary(call, timeout, then=lambda ran: Rows.of(ran.result))

    @staticmethod
    def rows(answer: text2sql_pb2.Text2SqlResponse) -> Rows:
        """The rows of an answer's SQL (`ask`'s preview) as Python values."""
        return Rows.of(answer.preview)

    def register(self, db_id: str, path: str, *, timeout: Optional[float] = None):
        """Registers an SQLite file under the server's allowed directory."""
        request = databases_pb2.RegisterDatabaseRequest(db_id=db_id, path=path)
        return self._unary(
            Call("Databases", "Register", request, databases_pb2.RegisterDatabaseResponse, "POST", "/v1/databases"),
            timeout,
        )

    def notes(self, db_id: str, *, timeout: Optional[float] = None):
        """The database's notes (definitions, units, rules every question over it is told)."""
        request = databases_pb2.ListNotesRequest(db_id=db_id)
        path = f"/v1/databases/{_db(db_id)}/notes"
        return self._unary(
            Call("Databases", "ListNotes", request, databases_pb2.ListNotesResponse, "GET", path), timeout
        )

    def add_note(self, db_id: str, text: str, *, timeout: Optional[float] = None):
        request = databases_pb2.AddNoteRequest(db_id=db_id, text=text)
        path = f"/v1/databases/{_db(db_id)}/notes"
        return self._unary(
            Call("Databases", "AddNote", request, databases_pb2.Note, "POST", path, {"text": text}), timeout
        )

    def edit_note(self, db_id: str, note_id: int, text: str, *, timeout: Optional[float] = None):
        request = databases_pb2.EditNoteRequest(db_id=db_id, id=note_id, text=text)
        path = f"/v1/databases/{_db(db_id)}/notes/{int(note_id)}"
        return self._unary(
            Call("Databases", "EditNote", request, databases_pb2.Note, "PUT", path, {"text": text}), timeout
        )

    def remove_note(self, db_id: str, note_id: int, *, timeout: Optional[float] = None):
        request = databases_pb2.RemoveNoteRequest(db_id=db_id, id=note_id)
        path = f"/v1/databases/{_db(db_id)}/notes/{int(note_id)}"
        return self._unary(
            Call("Databases", "RemoveNote", request, databases_pb2.ListNotesResponse, "DELETE", path), timeout
        )
