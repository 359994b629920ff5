//! `GET /openapi.json`: the HTTP API as an OpenAPI 3.1 document. The schemas of the messages
//! that `/v1/sql` and `/v1/databases` take and answer are derived from the proto files' own
//! descriptor set (their JSON names, types and comments), the way `pbjson` writes them, so the
//! document cannot drift from what the server sends; only the routes and the OpenAI-shaped
//! bodies (which have no proto message) are written here. `openapi_routes_are_the_routers`
//! checks the route list against the router, and `scripts/http/openapi_check.py` (in CI) checks
//! live answers against the schemas.

use std::sync::OnceLock;

use axum::Json;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet, SourceCodeInfo};
use serde_json::{Map, Value, json};

/// The proto package whose messages are the bodies.
const PACKAGE: &str = "quorum.v1";

/// One documented operation.
struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    /// The request body's schema, if it takes one.
    request: Option<&'static str>,
    /// The success status and its body's schema.
    status: u16,
    response: &'static str,
    /// The schema of the server-sent events it streams with `?stream=true`, if it can.
    events: Option<&'static str>,
}

const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    request: Option<&'static str>,
    response: &'static str,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        request,
        status: 200,
        response,
        events: None,
    }
}

/// Every authenticated route of the HTTP port.
const OPERATIONS: &[Operation] = &[
    op(
        "get",
        "/v1/models",
        "The models: decoders, their adapters, the embedder and `quorum-sql` (OpenAI).",
        None,
        "ModelList",
    ),
    op(
        "get",
        "/v1/models/{id}",
        "One model (OpenAI); 404 `model_not_found`.",
        None,
        "Model",
    ),
    Operation {
        events: Some("ChatCompletionChunk"),
        ..op(
            "post",
            "/v1/chat/completions",
            "A chat completion (OpenAI); model `quorum-sql` runs the text-to-SQL pipeline over the request's `database`.",
            Some("ChatCompletionRequest"),
            "ChatCompletion",
        )
    },
    Operation {
        events: Some("Completion"),
        ..op(
            "post",
            "/v1/completions",
            "A text completion (OpenAI).",
            Some("CompletionRequest"),
            "Completion",
        )
    },
    op(
        "post",
        "/v1/embeddings",
        "Sentence embeddings (OpenAI).",
        Some("EmbeddingsRequest"),
        "EmbeddingList",
    ),
    Operation {
        events: Some("Text2SqlEvent"),
        ..op(
            "post",
            "/v1/sql",
            "Answers a question over a database: the SQL, its rows and why (`Text2Sql.Generate`).",
            Some("Text2SqlRequest"),
            "Text2SqlResponse",
        )
    },
    op(
        "post",
        "/v1/sql/link",
        "Schema linking: the tables and columns a question needs (`Text2Sql.LinkSchema`).",
        Some("LinkSchemaRequest"),
        "LinkSchemaResponse",
    ),
    Operation {
        events: Some("DebugEvent"),
        ..op(
            "post",
            "/v1/sql/debug",
            "Repairs a query that fails or answers wrongly (`Text2Sql.Debug`).",
            Some("DebugRequest"),
            "DebugResponse",
        )
    },
    Operation {
        events: Some("OptimizeEvent"),
        ..op(
            "post",
            "/v1/sql/optimize",
            "Rewrites a query to run faster, with the same result (`Text2Sql.Optimize`).",
            Some("OptimizeRequest"),
            "OptimizeResponse",
        )
    },
    op(
        "post",
        "/v1/sql/explain",
        "Explains a query in words (`Text2Sql.Explain`).",
        Some("ExplainRequest"),
        "ExplainResponse",
    ),
    op(
        "get",
        "/v1/databases",
        "The databases (where each lives only for an admin).",
        None,
        "ListDatabasesResponse",
    ),
    Operation {
        status: 201,
        ..op(
            "post",
            "/v1/databases",
            "Registers a database: an SQLite file under the allowed directory, or a PostgreSQL or MySQL database on an allowed host.",
            Some("RegisterDatabaseRequest"),
            "RegisterDatabaseResponse",
        )
    },
    op(
        "get",
        "/v1/databases/{db_id}",
        "A database's schema as prompts present it.",
        None,
        "DescribeDatabaseResponse",
    ),
    op(
        "post",
        "/v1/databases/{db_id}/query",
        "Runs one read-only query under the answers' guard and limits.",
        Some("QueryBody"),
        "QueryResponse",
    ),
    op(
        "get",
        "/v1/databases/{db_id}/notes",
        "A database's notes.",
        None,
        "ListNotesResponse",
    ),
    op(
        "post",
        "/v1/databases/{db_id}/notes",
        "Adds a note.",
        Some("NoteBody"),
        "Note",
    ),
    op(
        "put",
        "/v1/databases/{db_id}/notes/{id}",
        "Replaces a note's text.",
        Some("NoteBody"),
        "Note",
    ),
    op(
        "delete",
        "/v1/databases/{db_id}/notes/{id}",
        "Removes a note; answers the notes left.",
        None,
        "ListNotesResponse",
    ),
];

/// The document, built once.
pub async fn document() -> Json<Value> {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    Json(DOCUMENT.get_or_init(build).clone())
}

fn build() -> Value {
    let mut schemas = proto_schemas();
    schemas.extend(http_schemas());
    let mut paths = Map::new();
    for o in OPERATIONS {
        let entry = paths.entry(o.path.to_owned()).or_insert_with(|| json!({}));
        entry[o.method] = operation(o);
    }
    paths.insert(
        "/mcp".into(),
        json!({ "post": {
            "summary": "The Model Context Protocol over streamable HTTP (JSON-RPC; see the MCP specification). Tools: list_databases, describe_database, ask, run_query, explain_query.",
            "security": [{ "bearer": [] }],
            "responses": { "200": { "description": "A JSON-RPC answer, or its events" } },
        }}),
    );
    for (path, summary, kind) in [
        ("/openapi.json", "This document.", "application/json"),
        ("/metrics", "Prometheus metrics.", "text/plain"),
        (
            "/live",
            "Liveness: 200 while the process serves.",
            "text/plain",
        ),
        (
            "/ready",
            "Readiness: 200 once every model is loaded, 503 while loading or draining.",
            "text/plain",
        ),
        ("/", "The playground page.", "text/html"),
    ] {
        paths.insert(
            path.into(),
            json!({ "get": {
                "summary": summary,
                "security": [],
                "responses": { "200": { "description": "OK", "content": { kind: {} } } },
            }}),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Quorum HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Text-to-SQL over HTTP. The `/v1/sql` and `/v1/databases` bodies are the gRPC messages of `proto/quorum/v1` in the proto3 JSON mapping (lowerCamelCase names, snake_case accepted in requests; enums by name; 64-bit integers as strings; every field written, defaults included), except result cells, which are plain JSON values (numbers, strings, null; a blob as base64), and rows, which are arrays of cells. Errors are OpenAI's error body with `grpc_code` beside `code`.",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
    })
}

fn reference(schema: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{schema}") })
}

fn operation(o: &Operation) -> Value {
    let mut parameters = Vec::new();
    for name in ["db_id", "id"] {
        if o.path.contains(&format!("{{{name}}}")) {
            parameters.push(json!({
                "name": name, "in": "path", "required": true, "schema": { "type": "string" },
            }));
        }
    }
    let mut success = json!({
        "description": "OK",
        "content": { "application/json": { "schema": reference(o.response) } },
    });
    if let Some(events) = o.events {
        parameters.push(json!({
            "name": "stream", "in": "query", "required": false, "schema": { "type": "boolean" },
            "description": "Stream server-sent events (also with `Accept: text/event-stream`; the OpenAI routes take `stream` in the body instead). Each event is named after the field of the event message it carries; a failure is an `error` event with the error body.",
        }));
        success["content"]["text/event-stream"] = json!({ "schema": reference(events) });
    }
    let mut out = json!({
        "summary": o.summary,
        "parameters": parameters,
        "responses": {
            o.status.to_string(): success,
            "default": {
                "description": "An error: the HTTP status of the gRPC code, OpenAI's body",
                "content": { "application/json": { "schema": reference("Error") } },
            },
        },
    });
    if let Some(request) = o.request {
        out["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": reference(request) } },
        });
    }
    out
}

/// Schemas of every message and enum of the package, named as in the proto.
fn proto_schemas() -> Map<String, Value> {
    let set = FileDescriptorSet::decode(quorum_proto::FILE_DESCRIPTOR_SET)
        .expect("the compiled-in descriptor set decodes");
    let mut out = Map::new();
    for file in set.file.iter().filter(|f| f.package() == PACKAGE) {
        let comments = Comments(file.source_code_info.as_ref());
        for (i, message) in file.message_type.iter().enumerate() {
            out.insert(
                message.name().to_owned(),
                message_schema(message, &comments, &[4, i as i32]),
            );
        }
        for (i, e) in file.enum_type.iter().enumerate() {
            out.insert(
                e.name().to_owned(),
                enum_schema(e, &comments, &[5, i as i32]),
            );
        }
    }
    // Written by hand as plain JSON (`quorum_proto::plain_json`).
    out.insert(
        "Value".into(),
        json!({
            "description": "A cell: an integer or a real as a number, text as a string, SQL NULL as null, a blob as its base64 string.",
            "type": ["integer", "number", "string", "null"],
        }),
    );
    out.insert(
        "Row".into(),
        json!({
            "description": "A row: its cells in column order.",
            "type": "array",
            "items": reference("Value"),
        }),
    );
    out
}

/// The leading comments of the proto source, by descriptor path.
struct Comments<'a>(Option<&'a SourceCodeInfo>);

impl Comments<'_> {
    fn at(&self, path: &[i32]) -> Option<String> {
        let info = self.0?;
        let location = info.location.iter().find(|l| l.path == path)?;
        let text = location.leading_comments().trim();
        (!text.is_empty()).then(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

fn message_schema(message: &DescriptorProto, comments: &Comments, path: &[i32]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (i, field) in message.field.iter().enumerate() {
        let mut field_path = path.to_vec();
        field_path.extend([2, i as i32]);
        let scalar = field_type(field);
        let mut schema = if field.label() == Label::Repeated {
            json!({ "type": "array", "items": scalar })
        } else {
            scalar
        };
        let in_oneof = field.oneof_index.is_some();
        // A singular message field is absent when unset, as an optional scalar is.
        let may_be_absent = field.proto3_optional()
            || (field.r#type() == Type::Message && field.label() != Label::Repeated);
        if let Some(text) = comments.at(&field_path) {
            let note = if may_be_absent {
                " (absent when unset)"
            } else if in_oneof {
                " (one of a oneof: at most one is present)"
            } else {
                ""
            };
            // A `$ref` takes no siblings in older readers: describe through `allOf`.
            if schema.get("$ref").is_some() {
                schema = json!({ "allOf": [schema] });
            }
            schema["description"] = Value::String(format!("{text}{note}"));
        }
        // Every other field but a oneof member is always written, defaults included.
        if !may_be_absent && !in_oneof {
            required.push(Value::String(field.json_name().to_owned()));
        }
        properties.insert(field.json_name().to_owned(), schema);
    }
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
    });
    if let Some(text) = comments.at(path) {
        schema["description"] = Value::String(text);
    }
    schema
}

fn field_type(field: &prost_types::FieldDescriptorProto) -> Value {
    match field.r#type() {
        Type::Double | Type::Float => json!({ "type": "number" }),
        Type::Int32 | Type::Sint32 | Type::Sfixed32 => {
            json!({ "type": "integer", "format": "int32" })
        }
        Type::Uint32 | Type::Fixed32 => json!({ "type": "integer", "minimum": 0 }),
        Type::Int64 | Type::Sint64 | Type::Sfixed64 | Type::Uint64 | Type::Fixed64 => {
            json!({ "type": "string", "format": "int64", "description": "A 64-bit integer as a decimal string (a JSON number is accepted in requests)." })
        }
        Type::Bool => json!({ "type": "boolean" }),
        Type::String => json!({ "type": "string" }),
        Type::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
        Type::Enum | Type::Message | Type::Group => {
            let name = field.type_name().rsplit('.').next().unwrap_or_default();
            reference(name)
        }
    }
}

fn enum_schema(e: &EnumDescriptorProto, comments: &Comments, path: &[i32]) -> Value {
    let names: Vec<&str> = e.value.iter().map(|v| v.name()).collect();
    let mut schema = json!({ "type": "string", "enum": names });
    if let Some(text) = comments.at(path) {
        schema["description"] = Value::String(text);
    }
    schema
}

/// The bodies with no proto message: the OpenAI API's (as far as Quorum answers them; the
/// OpenAI API reference has the rest) and the two path-addressed bodies.
fn http_schemas() -> Map<String, Value> {
    let open = |required: &[&str], properties: Value| json!({ "type": "object", "required": required, "properties": properties });
    let mut out = Map::new();
    out.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": { "error": {
                "type": "object",
                "required": ["message", "type", "param", "code", "grpc_code"],
                "properties": {
                    "message": { "type": "string" },
                    "type": { "type": "string", "description": "OpenAI's error type: invalid_request_error, authentication_error, permission_error, rate_limit_error, service_unavailable, server_error." },
                    "param": { "type": ["string", "null"], "description": "The request field at fault." },
                    "code": { "type": ["string", "null"], "description": "OpenAI's error code where there is one: invalid_api_key, model_not_found, context_length_exceeded, rate_limit_exceeded, unknown_parameter, missing_required_parameter, invalid_value." },
                    "grpc_code": { "type": "string", "description": "The gRPC status code of the same call over gRPC (INVALID_ARGUMENT, NOT_FOUND, ...)." },
                },
            }},
        }),
    );
    out.insert(
        "QueryBody".into(),
        json!({ "type": "object", "required": ["sql"], "additionalProperties": false,
                "properties": { "sql": { "type": "string" } } }),
    );
    out.insert(
        "NoteBody".into(),
        json!({ "type": "object", "required": ["text"], "additionalProperties": false,
                "properties": { "text": { "type": "string", "description": "1 to 2,000 characters of text." } } }),
    );
    out.insert(
        "Model".into(),
        open(
            &["id", "object", "created", "owned_by"],
            json!({
                "id": { "type": "string" },
                "object": { "const": "model" },
                "created": { "type": "integer" },
                "owned_by": { "type": "string" },
                "root": { "type": "string" },
                "parent": { "type": ["string", "null"], "description": "An adapter's base model." },
                "max_model_len": { "type": ["integer", "null"], "description": "The context: prompt plus `max_tokens`." },
                "roles": { "type": "array", "items": { "type": "string" } },
            }),
        ),
    );
    out.insert(
        "ModelList".into(),
        open(
            &["object", "data"],
            json!({ "object": { "const": "list" }, "data": { "type": "array", "items": reference("Model") } }),
        ),
    );
    let sampling = json!({
        "model": { "type": "string" },
        "temperature": { "type": "number", "description": "OpenAI's default: 1." },
        "top_p": { "type": "number" },
        "n": { "type": "integer" },
        "max_tokens": { "type": "integer", "description": "Up to the model's `max_model_len` less the prompt, unless the server caps it." },
        "max_completion_tokens": { "type": "integer" },
        "stop": { "type": ["string", "array"] },
        "seed": { "type": "integer" },
        "stream": { "type": "boolean" },
        "stream_options": { "type": "object" },
        "response_format": { "type": "object" },
        "user": { "type": "string" },
        "top_k": { "type": "integer", "description": "vLLM's extension, as are repetition_penalty, ignore_eos and guided_*." },
    });
    let mut chat = sampling.clone();
    chat["messages"] = json!({ "type": "array", "items": { "type": "object", "required": ["role"], "properties": {
        "role": { "enum": ["system", "developer", "user", "assistant"] },
        "content": { "type": ["string", "array"] },
    }}});
    chat["logprobs"] = json!({ "type": "boolean" });
    chat["database"] = json!({ "type": "string", "description": "Quorum's extension: the database model `quorum-sql` answers over (or a `database: <id>` line in a system message)." });
    out.insert(
        "ChatCompletionRequest".into(),
        json!({ "type": "object", "required": ["model", "messages"], "properties": chat,
                "description": "OpenAI's chat request. A field Quorum does not know is refused (`unknown_parameter`), never ignored." }),
    );
    let mut completion = sampling;
    completion["prompt"] = json!({ "type": ["string", "array"] });
    completion["logprobs"] =
        json!({ "type": "integer", "description": "0: each token's log-probability." });
    out.insert(
        "CompletionRequest".into(),
        json!({ "type": "object", "required": ["model", "prompt"], "properties": completion }),
    );
    let usage = json!({ "type": "object", "properties": {
        "prompt_tokens": { "type": "integer" },
        "completion_tokens": { "type": "integer" },
        "total_tokens": { "type": "integer" },
    }});
    out.insert(
        "ChatCompletion".into(),
        open(
            &["id", "object", "created", "model", "choices"],
            json!({
                "id": { "type": "string" },
                "object": { "const": "chat.completion" },
                "created": { "type": "integer" },
                "model": { "type": "string" },
                "choices": { "type": "array", "items": { "type": "object", "required": ["index", "message", "finish_reason"], "properties": {
                    "index": { "type": "integer" },
                    "message": { "type": "object", "required": ["role", "content"], "properties": {
                        "role": { "const": "assistant" }, "content": { "type": "string" } } },
                    "finish_reason": { "type": ["string", "null"] },
                }}},
                "usage": usage.clone(),
                "quorum": { "allOf": [reference("Text2SqlResponse")], "description": "Model `quorum-sql` only: the whole answer, as /v1/sql gives it." },
            }),
        ),
    );
    out.insert(
        "ChatCompletionChunk".into(),
        open(
            &["id", "object", "choices"],
            json!({ "id": { "type": "string" }, "object": { "const": "chat.completion.chunk" }, "choices": { "type": "array" } }),
        ),
    );
    out.insert(
        "Completion".into(),
        open(
            &["id", "object", "choices"],
            json!({ "id": { "type": "string" }, "object": { "const": "text_completion" }, "model": { "type": "string" },
                    "choices": { "type": "array", "items": { "type": "object", "properties": { "text": { "type": "string" } } } },
                    "usage": usage }),
        ),
    );
    out.insert(
        "EmbeddingsRequest".into(),
        json!({ "type": "object", "required": ["model", "input"], "additionalProperties": false, "properties": {
            "model": { "type": "string" },
            "input": { "type": ["string", "array"] },
            "encoding_format": { "enum": ["float", "base64"] },
            "dimensions": { "type": "integer" },
            "user": { "type": "string" },
        }}),
    );
    out.insert(
        "EmbeddingList".into(),
        open(
            &["object", "data", "model"],
            json!({ "object": { "const": "list" }, "model": { "type": "string" },
                    "data": { "type": "array", "items": { "type": "object", "required": ["index", "embedding"], "properties": {
                        "index": { "type": "integer" }, "embedding": { "type": ["array", "string"] } } } } }),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `/v1` route the router serves is documented, and every documented one is served:
    /// read from the router's source, where each route is written once.
    #[test]
    fn openapi_routes_are_the_routers() {
        let source = include_str!("mod.rs");
        let mut served: Vec<String> = source
            .split(".route(")
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"'))
            .filter_map(|rest| rest.split_once('"').map(|(path, _)| path.to_owned()))
            .filter(|path| path.starts_with("/v1"))
            .collect();
        served.sort();
        served.dedup();
        let mut documented: Vec<String> = OPERATIONS.iter().map(|o| o.path.to_owned()).collect();
        documented.sort();
        documented.dedup();
        assert_eq!(served, documented);
    }

    #[test]
    fn every_reference_resolves_and_cells_are_plain() {
        let doc = build();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let text = doc.to_string();
        for piece in text.split("#/components/schemas/").skip(1) {
            let name: String = piece.chars().take_while(|c| *c != '"').collect();
            assert!(schemas.contains_key(&name), "unresolved $ref {name}");
        }
        assert_eq!(
            schemas["ResultPreview"]["properties"]["rows"]["items"]["$ref"],
            "#/components/schemas/Row"
        );
        assert_eq!(
            schemas["ResultPreview"]["properties"]["totalRows"]["type"],
            "integer"
        );
        assert!(
            schemas["Candidate"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("id"))
        );
        // Comments travel from the proto files.
        assert!(
            schemas["Note"]["properties"]["id"]["description"]
                .as_str()
                .unwrap()
                .contains("never reused")
        );
    }
}
