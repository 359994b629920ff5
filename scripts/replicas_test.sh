#!/usr/bin/env bash
# Replicas behind a real gRPC load balancer, on loopback: three `quorum serve` processes
# (SmolLM2) behind nginx's gRPC proxy (Debian's nginx), and a Python grpcio client with gRPC's
# standard retry policy (UNAVAILABLE is retried) that keeps four calls in flight. Mid-load one
# replica is killed (SIGKILL) and another drained (SIGTERM). Every request must end with exactly
# one complete answer at the client; the drained replica must exit cleanly. Called by .ci/run.
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
mkdir -p "$work/stubs" "$work/nginx"
"$venv/bin/python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$work/stubs" \
    --grpc_python_out="$work/stubs" "$repo"/proto/quorum/v1/*.proto

free_port() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

(cd "$repo" && cargo build --quiet -p quorum-server)
# shellcheck source=scripts/replicas_lib.sh
. "$repo/scripts/replicas_lib.sh"
start_replicas 3
start_nginx

PYTHONPATH="$work/stubs" "$venv/bin/python" - "$lb_port" "${ports[@]}" "${pids[0]}" "${pids[1]}" <<'PY'
import json, os, signal, sys, threading, time
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from quorum.v1 import inference_pb2, inference_pb2_grpc

lb_port, replica_ports = sys.argv[1], sys.argv[2:5]
kill_pid, drain_pid = int(sys.argv[5]), int(sys.argv[6])
TOTAL, IN_FLIGHT = 48, 4

def wait_serving(port):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.time() + 300
    while True:
        try:
            if health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2).status == \
                    health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        assert time.time() < deadline, f"replica on {port} never became SERVING"
        time.sleep(0.2)

for port in replica_ports:
    wait_serving(port)
print(f"replicas test: 3 replicas SERVING on {', '.join(replica_ports)}, nginx on {lb_port}")

# gRPC's standard retry policy: calls refused with UNAVAILABLE (a draining replica, a dead
# upstream) are retried transparently with backoff.
service_config = json.dumps({"methodConfig": [{
    "name": [{"service": "quorum.v1.Inference"}],
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.2s", "maxBackoff": "2s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
}]})
channel = grpc.insecure_channel(f"127.0.0.1:{lb_port}", options=[
    ("grpc.service_config", service_config), ("grpc.enable_retries", 1)])
inference = inference_pb2_grpc.InferenceStub(channel)

lock = threading.Lock()
answers = {}           # request index -> completion tokens of its one complete answer
app_retries = []       # (index, status) of calls cut off after they had started streaming
next_index = [0]

def ask(index):
    request = inference_pb2.InferenceRequest(
        model="smol",
        prompt=f"Request {index}. List three SQL keywords:",
        sampling=inference_pb2.SamplingOptions(max_tokens=24),
    )
    for attempt in range(6):
        finals = []
        try:
            for message in inference.Generate(request, timeout=120):
                if message.finish_reason != inference_pb2.FINISH_REASON_UNSPECIFIED:
                    finals.append(message)
        except grpc.RpcError as e:
            # A stream cut by a killed replica cannot be retried by gRPC (it had started):
            # the application asks again.
            with lock:
                app_retries.append((index, e.code().name))
            time.sleep(0.5)
            continue
        assert len(finals) == 1, (index, finals)
        with lock:
            assert index not in answers, f"request {index} answered twice"
            answers[index] = finals[0].usage.completion_tokens
        return
    raise AssertionError(f"request {index} got no answer in 6 attempts")

errors = []
def worker():
    while True:
        with lock:
            index = next_index[0]
            if index >= TOTAL:
                return
            next_index[0] += 1
        try:
            ask(index)
        except Exception as e:  # reported below, the other workers go on
            errors.append(repr(e))

threads = [threading.Thread(target=worker) for _ in range(IN_FLIGHT)]
for t in threads:
    t.start()
def done():
    with lock:
        return len(answers)
while done() < TOTAL // 4:
    time.sleep(0.05)
os.kill(kill_pid, signal.SIGKILL)
print(f"replicas test: SIGKILL to replica 0 after {done()} answers")
while done() < TOTAL // 2:
    time.sleep(0.05)
os.kill(drain_pid, signal.SIGTERM)
print(f"replicas test: SIGTERM to replica 1 after {done()} answers")
for t in threads:
    t.join()
assert not errors, errors
assert sorted(answers) == list(range(TOTAL)), sorted(set(range(TOTAL)) - set(answers))
assert all(tokens >= 1 for tokens in answers.values()), answers
print(f"replicas test: {TOTAL} requests, {TOTAL} answers, each exactly once; "
      f"{len(app_retries)} calls cut off mid-stream and asked again: {app_retries}")
PY

# The drained replica finishes its in-flight calls and exits 0 within its grace period.
for _ in $(seq 1 600); do kill -0 "${pids[1]}" 2>/dev/null || break; sleep 0.1; done
if kill -0 "${pids[1]}" 2>/dev/null; then echo "replica 1 did not exit after SIGTERM" >&2; exit 1; fi
wait "${pids[1]}" && drain_rc=0 || drain_rc=$?
[[ $drain_rc -eq 0 ]] || { echo "replica 1 exited with $drain_rc after SIGTERM" >&2; tail -20 "$work/replica1.log" >&2; exit 1; }
grep -q "draining" "$work/replica1.log" || { echo "replica 1 did not log its drain" >&2; exit 1; }
echo "replicas test: the drained replica exited cleanly"
echo "replicas test: OK"
