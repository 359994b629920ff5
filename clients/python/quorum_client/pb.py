"""The generated protobuf modules of `quorum.v1`, under short names."""

from ._proto.quorum.v1 import common_pb2, databases_pb2, inference_pb2, text2sql_pb2

__all__ = ["common_pb2", "databases_pb2", "inference_pb2", "text2sql_pb2"]
