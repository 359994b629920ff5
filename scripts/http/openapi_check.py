"""The HTTP API against its own OpenAPI document, on a live server.

Usage: openapi_check.py BASE_URL TOKEN REGISTERABLE_FILE

Fetches /openapi.json (no token), validates it as an OpenAPI 3.1 document, then calls every
documented /v1 operation at least once and checks each answer (successes and errors alike)
against the schema the document gives for it. Also checks what a program relies on: cells as
plain JSON values, every candidate's id present, OpenAI's error codes beside the gRPC ones,
unknown fields refused, `model` required, `max_tokens` beyond the server's old 1,024 cap up to
the model's context, a streamed sub-task's events, and a registration over HTTP.
REGISTERABLE_FILE is an SQLite file's path relative to the server's `allowed_dir`.
"""

import json
import sys
import urllib.error
import urllib.request

import jsonschema
from openapi_spec_validator import validate

base, token, registerable = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]

with urllib.request.urlopen(f"{base}/openapi.json") as r:
    doc = json.load(r)
validate(doc)
print(f"/openapi.json: a valid OpenAPI {doc['openapi']} document, {len(doc['paths'])} paths")

exercised = set()


def schema_of(method, path, status, content="application/json"):
    responses = doc["paths"][path][method]["responses"]
    response = responses.get(str(status), responses.get("default"))
    assert response, f"{method} {path}: status {status} undocumented"
    return response["content"][content]["schema"]


def conforms(value, schema, what):
    root = {"components": doc["components"], **schema}
    jsonschema.Draft202012Validator(root).validate(value)


def call(method, template, path=None, body=None, status=200, stream=False, auth=True):
    """Calls one operation and checks its answer against the document; answers the JSON (or,
    streamed, the list of (event, data) pairs)."""
    url = base + (path or template)
    headers = {"content-type": "application/json"}
    if auth:
        headers["authorization"] = f"Bearer {token}"
    if stream:
        headers["accept"] = "text/event-stream"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method.upper())
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            got, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        got, text = e.code, e.read().decode()
    assert got == status, f"{method} {url}: {got}, wanted {status}: {text[:400]}"
    exercised.add((method, template))
    if stream:
        events, name = [], None
        for line in text.splitlines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1])))
        return events
    value = json.loads(text)
    conforms(value, schema_of(method, template, status), f"{method} {template}")
    return value


# Databases.
listed = call("get", "/v1/databases")
assert any(d["dbId"] == "concert_singer" for d in listed["databases"]), listed
described = call("get", "/v1/databases/{db_id}", "/v1/databases/concert_singer")
examples = [e for t in described["tables"] for c in t["columns"] for e in c["examples"]]
assert examples and all(not isinstance(e, dict) for e in examples), examples[:5]
ran = call("post", "/v1/databases/{db_id}/query", "/v1/databases/concert_singer/query",
           {"sql": "SELECT count(*), 'x', NULL, 2.5 FROM singer"})
assert ran["result"]["rows"] == [[6, "x", None, 2.5]], ran
assert ran["result"]["totalRows"] == 1, ran
refused = call("post", "/v1/databases/{db_id}/query", "/v1/databases/concert_singer/query",
               {"sql": "DELETE FROM singer"}, status=400)
assert refused["error"]["grpc_code"] == "INVALID_ARGUMENT", refused
registered = call("post", "/v1/databases", body={"dbId": "pets_http", "path": registerable}, status=201)
assert registered["database"]["dbId"] == "pets_http", registered
again = call("post", "/v1/databases", body={"dbId": "pets_http", "path": registerable}, status=409)
assert again["error"]["grpc_code"] == "ALREADY_EXISTS", again
assert any(d["dbId"] == "pets_http" for d in call("get", "/v1/databases")["databases"])
note = call("post", "/v1/databases/{db_id}/notes", "/v1/databases/pets_http/notes", {"text": "Ages are in years."})
notes_path = f"/v1/databases/pets_http/notes/{note['id']}"
call("put", "/v1/databases/{db_id}/notes/{id}", notes_path, {"text": "Pet ages are in years."})
assert call("get", "/v1/databases/{db_id}/notes", "/v1/databases/pets_http/notes")["notes"][0]["id"] == note["id"]
left = call("delete", "/v1/databases/{db_id}/notes/{id}", notes_path)
assert left["notes"] == [], left
print("databases: listed, described (plain example cells), queried ([[6, 'x', None, 2.5]]), "
      "a DELETE refused, pets_http registered (201, then 409), a note added, edited, removed")

# Text-to-SQL and its sub-tasks.
question = {"dbId": "concert_singer", "question": "How many singers do we have?"}
answer = call("post", "/v1/sql", body=question)
assert answer["preview"]["rows"] == [[6]], answer["preview"]
assert [c["id"] for c in answer["candidates"]] == list(range(len(answer["candidates"]))), answer["candidates"]
linked = call("post", "/v1/sql/link", body=question)
assert "singer" in [t["name"].lower() for t in linked["tables"]], linked
explained = call("post", "/v1/sql/explain", body={"dbId": "concert_singer", "sql": "SELECT count(*) FROM singer"})
assert explained["explanation"].strip(), explained
events = call("post", "/v1/sql/debug", body={
    "dbId": "concert_singer", "question": "How many singers do we have?",
    "sql": "SELECT count(*) FROM singers", "error": "no such table: singers"}, stream=True)
names = [name for name, _ in events]
assert names and names[-1] == "answer" and set(names[:-1]) <= {"round"}, names
conforms(events[-1][1], schema_of("post", "/v1/sql/debug", 200), "debug answer")
optimized = call("post", "/v1/sql/optimize", body={
    "dbId": "concert_singer", "sql": "SELECT count(*) FROM singer", "question": "How many singers?",
    "rewrites": 1, "timingPairs": 1})
print(f"/v1/sql: {answer['sql']!r} -> [[6]], candidate ids 0..{len(answer['candidates']) - 1}; "
      f"link: {[t['name'] for t in linked['tables']]}; explain: {len(explained['explanation'])} chars; "
      f"debug streamed: {names}; optimize: {len(optimized['rewrites'])} rewrite(s)")

# The OpenAI routes and their conventions.
models = call("get", "/v1/models")
generator = next(m for m in models["data"] if "generator" in m.get("roles", []))
call("get", "/v1/models/{id}", "/v1/models/quorum-sql")
missing = call("get", "/v1/models/{id}", "/v1/models/no-such-model", status=404)
assert missing["error"]["code"] == "model_not_found", missing
chat = {"model": generator["id"], "messages": [{"role": "user", "content": "Say hi."}], "temperature": 0}
no_model = call("post", "/v1/chat/completions", body={k: v for k, v in chat.items() if k != "model"}, status=400)
assert no_model["error"]["code"] == "missing_required_parameter" and no_model["error"]["param"] == "model", no_model
unknown = call("post", "/v1/chat/completions", body={**chat, "frobnicate": True}, status=400)
assert unknown["error"]["code"] == "unknown_parameter" and unknown["error"]["param"] == "frobnicate", unknown
stored = call("post", "/v1/chat/completions", body={**chat, "store": True}, status=400)
assert stored["error"]["param"] == "store", stored
too_long = call("post", "/v1/chat/completions", body={**chat, "max_tokens": generator["max_model_len"]}, status=400)
assert too_long["error"]["code"] == "context_length_exceeded", too_long
long_budget = max(1025, generator["max_model_len"] // 2)
replied = call("post", "/v1/chat/completions", body={**chat, "max_tokens": long_budget, "user": "analyst-7"})
assert replied["choices"][0]["message"]["content"], replied
call("post", "/v1/completions", body={"model": generator["id"], "prompt": "SELECT", "max_tokens": 4, "temperature": 0})
embedder = next(m for m in models["data"] if "embedder" in m.get("roles", []))
call("post", "/v1/embeddings", body={"model": embedder["id"], "input": "How many singers?"})
no_embedder_model = call("post", "/v1/embeddings", body={"input": "x"}, status=400)
assert no_embedder_model["error"]["param"] == "model", no_embedder_model
unauthenticated = call("get", "/v1/databases", status=401, auth=False)
assert unauthenticated["error"]["code"] == "invalid_api_key", unauthenticated
print(f"OpenAI conventions: model required, unknown fields refused, store=true refused, "
      f"max_tokens {long_budget} answered and {generator['max_model_len']} refused as "
      f"context_length_exceeded, model_not_found, invalid_api_key")

documented = {(m, p) for p, ops in doc["paths"].items() for m in ops if p.startswith("/v1")}
assert documented <= exercised, f"documented but not exercised: {sorted(documented - exercised)}"
print(f"openapi check: OK ({len(documented)} /v1 operations, each answer matched its schema)")
