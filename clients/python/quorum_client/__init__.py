"""Python client for Quorum, the text-to-SQL inference server.

`Client` wraps the gRPC services (Text2Sql, Inference, Databases, health), `AsyncClient` is the
same for asyncio, and `HttpClient` makes the same calls over the HTTP API; `pb` holds the
generated message modules (`pb.text2sql_pb2.PipelineOptions`, ...); `Rows` is a result as
Python values.
"""

from . import pb
from .aio import AsyncClient
from .client import Client
from .errors import QuorumError
from .http import HttpClient
from .rows import Rows

__all__ = ["AsyncClient", "Client", "HttpClient", "QuorumError", "Rows", "pb"]
