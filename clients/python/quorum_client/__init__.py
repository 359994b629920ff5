"""Python client for Quorum, the text-to-SQL inference server.

`Client` wraps the gRPC services (Text2Sql, Inference, Databases, health); `pb` holds the
generated message modules (`pb.text2sql_pb2.PipelineOptions`, ...); `Rows` is a result as
Python values.
"""

from . import pb
from .client import Client, QuorumError
from .rows import Rows

__all__ = ["Client", "QuorumError", "Rows", "pb"]
