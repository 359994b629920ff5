from quorum_client._proto.quorum.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DatabaseOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATABASE_ORIGIN_UNSPECIFIED: _ClassVar[DatabaseOrigin]
    DATABASE_ORIGIN_CONFIG: _ClassVar[DatabaseOrigin]
    DATABASE_ORIGIN_SCAN: _ClassVar[DatabaseOrigin]
    DATABASE_ORIGIN_REGISTERED: _ClassVar[DatabaseOrigin]
DATABASE_ORIGIN_UNSPECIFIED: DatabaseOrigin
DATABASE_ORIGIN_CONFIG: DatabaseOrigin
DATABASE_ORIGIN_SCAN: DatabaseOrigin
DATABASE_ORIGIN_REGISTERED: DatabaseOrigin

class QueryRequest(_message.Message):
    __slots__ = ("db_id", "sql")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    sql: str
    def __init__(self, db_id: _Optional[str] = ..., sql: _Optional[str] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _common_pb2.ResultPreview
    def __init__(self, result: _Optional[_Union[_common_pb2.ResultPreview, _Mapping]] = ...) -> None: ...

class Note(_message.Message):
    __slots__ = ("id", "text")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    id: int
    text: str
    def __init__(self, id: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class ListNotesRequest(_message.Message):
    __slots__ = ("db_id",)
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    def __init__(self, db_id: _Optional[str] = ...) -> None: ...

class ListNotesResponse(_message.Message):
    __slots__ = ("notes",)
    NOTES_FIELD_NUMBER: _ClassVar[int]
    notes: _containers.RepeatedCompositeFieldContainer[Note]
    def __init__(self, notes: _Optional[_Iterable[_Union[Note, _Mapping]]] = ...) -> None: ...

class AddNoteRequest(_message.Message):
    __slots__ = ("db_id", "text")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    text: str
    def __init__(self, db_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class EditNoteRequest(_message.Message):
    __slots__ = ("db_id", "id", "text")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    id: int
    text: str
    def __init__(self, db_id: _Optional[str] = ..., id: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class RemoveNoteRequest(_message.Message):
    __slots__ = ("db_id", "id")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    id: int
    def __init__(self, db_id: _Optional[str] = ..., id: _Optional[int] = ...) -> None: ...

class ListDatabasesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DatabaseSummary(_message.Message):
    __slots__ = ("db_id", "table_count", "origin", "dialect", "location")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DIALECT_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    table_count: int
    origin: DatabaseOrigin
    dialect: str
    location: str
    def __init__(self, db_id: _Optional[str] = ..., table_count: _Optional[int] = ..., origin: _Optional[_Union[DatabaseOrigin, str]] = ..., dialect: _Optional[str] = ..., location: _Optional[str] = ...) -> None: ...

class ListDatabasesResponse(_message.Message):
    __slots__ = ("databases", "note")
    DATABASES_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    databases: _containers.RepeatedCompositeFieldContainer[DatabaseSummary]
    note: str
    def __init__(self, databases: _Optional[_Iterable[_Union[DatabaseSummary, _Mapping]]] = ..., note: _Optional[str] = ...) -> None: ...

class DescribeDatabaseRequest(_message.Message):
    __slots__ = ("db_id",)
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    def __init__(self, db_id: _Optional[str] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "declared_type", "primary_key", "examples")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DECLARED_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    name: str
    declared_type: str
    primary_key: bool
    examples: _containers.RepeatedCompositeFieldContainer[_common_pb2.Value]
    def __init__(self, name: _Optional[str] = ..., declared_type: _Optional[str] = ..., primary_key: _Optional[bool] = ..., examples: _Optional[_Iterable[_Union[_common_pb2.Value, _Mapping]]] = ...) -> None: ...

class Table(_message.Message):
    __slots__ = ("name", "columns", "primary_key", "sample_rows")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ROWS_FIELD_NUMBER: _ClassVar[int]
    name: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    primary_key: _containers.RepeatedScalarFieldContainer[str]
    sample_rows: _containers.RepeatedCompositeFieldContainer[_common_pb2.Row]
    def __init__(self, name: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., primary_key: _Optional[_Iterable[str]] = ..., sample_rows: _Optional[_Iterable[_Union[_common_pb2.Row, _Mapping]]] = ...) -> None: ...

class ForeignKey(_message.Message):
    __slots__ = ("from_table", "from_column", "to_table", "to_column")
    FROM_TABLE_FIELD_NUMBER: _ClassVar[int]
    FROM_COLUMN_FIELD_NUMBER: _ClassVar[int]
    TO_TABLE_FIELD_NUMBER: _ClassVar[int]
    TO_COLUMN_FIELD_NUMBER: _ClassVar[int]
    from_table: str
    from_column: str
    to_table: str
    to_column: str
    def __init__(self, from_table: _Optional[str] = ..., from_column: _Optional[str] = ..., to_table: _Optional[str] = ..., to_column: _Optional[str] = ...) -> None: ...

class DescribeDatabaseResponse(_message.Message):
    __slots__ = ("db_id", "tables", "foreign_keys", "origin")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_KEYS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    tables: _containers.RepeatedCompositeFieldContainer[Table]
    foreign_keys: _containers.RepeatedCompositeFieldContainer[ForeignKey]
    origin: DatabaseOrigin
    def __init__(self, db_id: _Optional[str] = ..., tables: _Optional[_Iterable[_Union[Table, _Mapping]]] = ..., foreign_keys: _Optional[_Iterable[_Union[ForeignKey, _Mapping]]] = ..., origin: _Optional[_Union[DatabaseOrigin, str]] = ...) -> None: ...

class RegisterDatabaseRequest(_message.Message):
    __slots__ = ("db_id", "path", "postgres", "mysql")
    DB_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    POSTGRES_FIELD_NUMBER: _ClassVar[int]
    MYSQL_FIELD_NUMBER: _ClassVar[int]
    db_id: str
    path: str
    postgres: PostgresConnection
    mysql: MySqlConnection
    def __init__(self, db_id: _Optional[str] = ..., path: _Optional[str] = ..., postgres: _Optional[_Union[PostgresConnection, _Mapping]] = ..., mysql: _Optional[_Union[MySqlConnection, _Mapping]] = ...) -> None: ...

class MySqlConnection(_message.Message):
    __slots__ = ("url", "database", "password_name")
    URL_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_NAME_FIELD_NUMBER: _ClassVar[int]
    url: str
    database: str
    password_name: str
    def __init__(self, url: _Optional[str] = ..., database: _Optional[str] = ..., password_name: _Optional[str] = ...) -> None: ...

class PostgresConnection(_message.Message):
    __slots__ = ("url", "schema", "password_name")
    URL_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_NAME_FIELD_NUMBER: _ClassVar[int]
    url: str
    schema: str
    password_name: str
    def __init__(self, url: _Optional[str] = ..., schema: _Optional[str] = ..., password_name: _Optional[str] = ...) -> None: ...

class RegisterDatabaseResponse(_message.Message):
    __slots__ = ("database",)
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    database: DatabaseSummary
    def __init__(self, database: _Optional[_Union[DatabaseSummary, _Mapping]] = ...) -> None: ...
