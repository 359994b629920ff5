#!/usr/bin/env bash
# A client nobody on the team wrote: Python grpcio with stubs generated from proto/ by
# grpcio-tools drives `quorum serve` (SmolLM2 only) over loopback: health, streaming
# Inference.Generate and Databases.List. Called by .ci/run after the models are fetched.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${QUORUM_VENV:-$HOME/.cache/quorum-venv}"
target="${CARGO_TARGET_DIR:-$repo/target}"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet grpcio grpcio-tools grpcio-health-checking
mkdir -p "$work/stubs"
"$venv/bin/python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$work/stubs" \
    --grpc_python_out="$work/stubs" "$repo"/proto/quorum/v1/*.proto

free_port() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

(cd "$repo" && cargo build --quiet -p quorum-server)
# shellcheck source=scripts/replicas_lib.sh
. "$repo/scripts/replicas_lib.sh"
start_replicas 1
port="${ports[0]}"

PYTHONPATH="$work/stubs" "$venv/bin/python" - "$port" <<'PY'
import sys, time
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from quorum.v1 import inference_pb2, inference_pb2_grpc, databases_pb2, databases_pb2_grpc

channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
health = health_pb2_grpc.HealthStub(channel)
deadline = time.time() + 180
while True:
    try:
        status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2).status
        if status == health_pb2.HealthCheckResponse.SERVING:
            break
    except grpc.RpcError:
        pass
    assert time.time() < deadline, "server never became SERVING"
    time.sleep(0.2)

inference = inference_pb2_grpc.InferenceStub(channel)
request = inference_pb2.InferenceRequest(
    model="smol",
    chat=inference_pb2.ChatMessages(messages=[
        inference_pb2.ChatMessage(role="user", content="Write SQL that counts the rows of table singer.")]),
    sampling=inference_pb2.SamplingOptions(max_tokens=16),
)
text, finals = "", []
for message in inference.Generate(request, timeout=120):
    text += message.text
    if message.finish_reason != inference_pb2.FINISH_REASON_UNSPECIFIED:
        finals.append(message)
assert text.strip(), "no text streamed"
assert len(finals) == 1 and finals[0].usage.completion_tokens >= 1, finals
print(f"Inference.Generate streamed {finals[0].usage.completion_tokens} tokens: {text!r}")

try:
    inference.Generate(inference_pb2.InferenceRequest(model="nope", prompt="x"), timeout=30).next()
    raise AssertionError("unknown model accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.NOT_FOUND, e

databases = databases_pb2_grpc.DatabasesStub(channel)
listed = databases.List(databases_pb2.ListDatabasesRequest(), timeout=30).databases
by_id = {d.db_id: d for d in listed}
assert by_id["concert_singer"].table_count >= 4, listed
assert by_id["concert_singer"].origin == databases_pb2.DATABASE_ORIGIN_CONFIG
print(f"Databases.List: {len(listed)} databases, concert_singer has {by_id['concert_singer'].table_count} tables")
print("python client test: OK")
PY
