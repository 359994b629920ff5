#!/usr/bin/env bash
# The HTTP face and the Python client against one live `quorum serve` (Qwen2.5-Coder-0.5B with
# the rep-s2 adapter on one of two generators, MiniLM, concert_singer, a bearer token, one
# text-to-SQL run at a time and none waiting), over loopback sockets:
#   - curl: 503 while the models load, 401/404/400/413/429 with OpenAI-style error bodies,
#     /v1/sql answered and streamed as server-sent events;
#   - CORS for the configured origin only;
#   - the official `openai` Python client and LangChain's ChatOpenAI (scripts/http/openai_check.py);
#   - every /v1 operation of /openapi.json called, each answer checked against its schema
#     (scripts/http/openapi_check.py);
#   - the official MCP Python client over streamable HTTP and over stdio through `quorum mcp`
#     (scripts/http/mcp_check.py);
#   - the Python client package, installed into a fresh venv, and its test suite
#     (clients/python/tests), after checking its generated stubs are current;
#   - /metrics read by Prometheus' own text-format parser, and every metric the Grafana
#     dashboard (deploy/grafana/) charts served (scripts/http/metrics_check.py);
#   - the playground in headless Chromium (scripts/http/playground_check.py): a question, its
#     SQL edited and run again, a chart, pages, CSV, a refused DELETE; its screenshots go to
#     $QUORUM_ARTIFACTS (default ci-artifacts/) as playground.png and playground-chart.png.
# With SURFACE_BENCH_ROUNDS=N it then times one question through gRPC, HTTP and MCP, N rounds
# (scripts/http/surface_overhead_bench.py): a benchmark, off unless asked for.
# Called by .ci/run after the models are fetched; installs Debian's chromium if missing.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
artifacts="${QUORUM_ARTIFACTS:-$repo/ci-artifacts}"
models="${QUORUM_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/models}"
spider="${QUORUM_SPIDER_DIR:-$repo/../shared/data/spider}"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$artifacts"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "installing chromium and chromedriver (Debian)" >&2
    apt-get install -y -q chromium chromium-driver >/dev/null \
        || { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
fi

# A fresh venv: the client package must install from the checkout alone.
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install --quiet "$repo/clients/python[test]" openai selenium prometheus-client grpcio-tools==1.85.1 mcp \
    openapi-spec-validator jsonschema langchain-openai
"$py" "$repo/clients/python/generate.py" --check

(cd "$repo" && cargo build --quiet -p quorum-server)
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
grpc_port="$(free_port)"
http_port="$(free_port)"
token="http-s3cret"
cat > "$work/quorum.toml" <<TOML
[server]
listen = "127.0.0.1:$grpc_port"
metrics_listen = "127.0.0.1:$http_port"
auth_token = "$token"
cors_origins = ["http://app.example"]

[limits]
max_concurrent_text2sql = 1
max_waiting_text2sql = 0

[[models]]
source = "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
name = "qwen2.5-coder-0.5b"
roles = ["generator", "selector"]
format = "rep"
[models.adapters]
rep-s2 = "$repo/adapters/coder-rep-s2"

[[models]]
source = "$models/all-minilm-l6-v2"
name = "all-minilm-l6-v2"
roles = ["embedder"]

[databases]
dir = "$work/no-scan"
allowed_dir = "$spider/database"
[databases.entries]
concert_singer = "$spider/database/concert_singer/concert_singer.sqlite"

[pipeline]
max_new_tokens = 96
[[pipeline.generators]]
name = "qwen-rep"
model = "qwen2.5-coder-0.5b"
format = "rep"
adapter = "rep-s2"
[[pipeline.generators]]
name = "qwen-ddl"
model = "qwen2.5-coder-0.5b"
format = "simple_ddl"
TOML
"$target/debug/quorum" serve --config "$work/quorum.toml" 2>"$work/server.log" &
server_pid=$!
base="http://127.0.0.1:$http_port"
auth=(-H "authorization: Bearer $token")
json=(-H "content-type: application/json")
fail() { echo "http api test: $*" >&2; tail -30 "$work/server.log" >&2; exit 1; }

# status CODE CURL-ARGS...: the request answers CODE with an OpenAI-style error body.
status() {
    local want=$1; shift
    local got
    got=$(curl -s -o "$work/body" -w '%{http_code}' "$@")
    [[ "$got" == "$want" ]] || fail "expected $want, got $got: $(head -c 300 "$work/body")"
    if [[ "$want" != 200 ]]; then
        grep -q '"error"' "$work/body" || fail "$want without an error body: $(head -c 300 "$work/body")"
    fi
}
chat='{"model":"qwen2.5-coder-0.5b","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'

# While the models load: 503 (the HTTP port answers at once).
for _ in $(seq 100); do curl -s -o /dev/null "$base/live" && break; sleep 0.05; done
status 503 "${auth[@]}" "${json[@]}" -d "$chat" "$base/v1/chat/completions"
echo "503 while loading: $(cat "$work/body")"
for _ in $(seq 600); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/ready")" == 200 ]] && break
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited"
    sleep 0.5
done
status 200 "$base/ready"

status 401 "${json[@]}" -d "$chat" "$base/v1/chat/completions"
status 401 -H "authorization: Bearer wrong" "$base/v1/models"
status 404 "${auth[@]}" "${json[@]}" -d '{"model":"nope","messages":[{"role":"user","content":"hi"}]}' "$base/v1/chat/completions"
status 404 "${auth[@]}" "$base/v1/databases/no_such_db"
status 400 "${auth[@]}" "${json[@]}" -d '{"model":"qwen2.5-coder-0.5b","messages":[{"role":"user","content":"hi"}],"temperature":-1}' "$base/v1/chat/completions"
grep -q '"param":"sampling.temperature"' "$work/body" || fail "400 without the field: $(cat "$work/body")"
status 400 "${auth[@]}" "${json[@]}" -d '{"messages": ' "$base/v1/chat/completions"
status 400 "${auth[@]}" "${json[@]}" -d '{"db_id":"concert_singer","question":""}' "$base/v1/sql"
head -c 3000000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt":"/; s/$/"}/' > "$work/big.json"
status 413 "${auth[@]}" "${json[@]}" --data-binary @"$work/big.json" "$base/v1/completions"
status 200 "$base/"
grep -q 'Quorum' "$work/body" || fail "the playground page"
echo "errors: 401, 404, 400 (field named), 413; the playground page is served"

# CORS: a page on the configured origin may call the API (the preflight carries no token); one
# on another origin gets no permission.
curl -s -D "$work/headers" -o /dev/null -X OPTIONS -H 'origin: http://app.example' \
    -H 'access-control-request-method: POST' -H 'access-control-request-headers: authorization, content-type' \
    "$base/v1/sql"
grep -qi '^access-control-allow-origin: http://app.example' "$work/headers" || fail "no CORS for the allowed origin: $(cat "$work/headers")"
grep -qi '^access-control-allow-headers:.*authorization' "$work/headers" || fail "the preflight does not allow authorization"
curl -s -D "$work/headers" -o /dev/null -X OPTIONS -H 'origin: http://evil.example' \
    -H 'access-control-request-method: POST' "$base/v1/sql"
! grep -qi '^access-control-allow-origin' "$work/headers" || fail "CORS allowed another origin: $(cat "$work/headers")"
curl -s -D "$work/headers" -o /dev/null "${auth[@]}" -H 'origin: http://app.example' "$base/v1/databases"
grep -qi '^access-control-allow-origin: http://app.example' "$work/headers" || fail "a CORS response without its origin"
echo "CORS: the configured origin allowed (preflight and response), another refused"

# /v1/sql: one answer as JSON, then the stages as events.
status 200 "${auth[@]}" "${json[@]}" -d '{"dbId":"concert_singer","question":"How many singers do we have?"}' "$base/v1/sql"
"$py" - "$work/body" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert "count" in answer["sql"].lower(), answer["sql"]
assert answer["preview"]["rows"] == [[6]] and answer["preview"]["totalRows"] == 1, answer["preview"]
assert all("id" in c for c in answer["candidates"]), answer["candidates"]
assert len(answer["candidates"]) >= 2 and answer["vote"]["clusters"], answer
print(f"/v1/sql: {answer['sql']!r}, {len(answer['candidates'])} candidates")
PY
curl -sN "${auth[@]}" "${json[@]}" -H 'accept: text/event-stream' \
    -d '{"db_id":"concert_singer","question":"How many singers do we have?"}' "$base/v1/sql" > "$work/events"
events=$(grep '^event:' "$work/events" | awk '{print $2}' | tr '\n' ' ')
[[ "$events" == "pre_sql linked_tables candidate "*"vote answer " ]] || fail "stage events: $events"
echo "/v1/sql streamed: $events"

# 429: the only run slot is taken and nobody may wait.
curl -sN "${auth[@]}" "${json[@]}" -d '{"db_id":"concert_singer","question":"List the names of all singers."}' \
    "$base/v1/sql?stream=true" > "$work/holder" &
holder=$!
for _ in $(seq 200); do grep -q '^event: pre_sql' "$work/holder" && break; sleep 0.05; done
grep -q '^event: pre_sql' "$work/holder" || fail "the holding run never started"
code=$(curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' "${auth[@]}" "${json[@]}" \
    -d '{"db_id":"concert_singer","question":"How many concerts are there?"}' "$base/v1/sql")
[[ "$code" == 429 ]] || fail "expected 429 while the slot is taken, got $code: $(cat "$work/body")"
grep -qi '^retry-after: 1' "$work/headers" || fail "429 without Retry-After"
wait "$holder"
grep -q '^event: answer' "$work/holder" || fail "the holding run did not answer"
echo "429 with Retry-After while the run slot is taken: $(cat "$work/body")"

"$py" "$repo/scripts/http/openai_check.py" "$base/v1" "$token"
"$py" "$repo/scripts/http/openapi_check.py" "$base" "$token" pets_1/pets_1.sqlite
"$py" "$repo/scripts/http/mcp_check.py" "$base" "127.0.0.1:$grpc_port" "$token" "$target/debug/quorum" \
    "$spider/database/concert_singer/concert_singer.sqlite"
QUORUM_TARGET="127.0.0.1:$grpc_port" QUORUM_HTTP="$base" QUORUM_TOKEN="$token" "$py" -m pytest -q "$repo/clients/python/tests"
"$py" "$repo/scripts/http/metrics_check.py" "$base/metrics" "$repo/deploy/grafana/quorum-dashboard.json"
"$py" "$repo/scripts/http/playground_check.py" "$base/" "$token" "$artifacts/playground.png" \
    "$spider/database/concert_singer/concert_singer.sqlite"
echo "http api test: OK"
if [[ -n "${SURFACE_BENCH_ROUNDS:-}" ]]; then
    "$py" "$repo/scripts/http/surface_overhead_bench.py" "$base" "127.0.0.1:$grpc_port" "$token" \
        concert_singer "How many singers do we have?" "$SURFACE_BENCH_ROUNDS"
fi
