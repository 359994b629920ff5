#!/usr/bin/env bash
# Renders the Kustomize overlays under deploy/ and validates every object against the bundled
# Kubernetes schemas (strict: unknown fields fail), then checks what the schemas cannot: the
# pod's termination grace covers preStop + the server's grace period, and probes point at the
# gRPC health entries the server has. The ConfigMaps' TOML is parsed by the server's own config
# loader in `cargo test -p quorum-server` (config::tests::deploy_configs_parse).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${QUORUM_TOOLS_VENV:-$HOME/.cache/quorum/tools-venv}
command -v kubectl >/dev/null || {
  echo "check-deploy: installing kubectl (Debian's kubernetes-client)" >&2
  apt-get install -y -q kubernetes-client >/dev/null
}
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check kubernetes-validate==1.37.0
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for overlay in cpu gpu; do
  kubectl kustomize "deploy/overlays/$overlay" > "$OUT/$overlay.yaml"
  # ServiceMonitor is a Prometheus Operator CRD with no bundled schema: it is reported, not failed.
  "$VENV/bin/kubernetes-validate" --strict --quiet "$OUT/$overlay.yaml"
  "$VENV/bin/python" - "$OUT/$overlay.yaml" "$overlay" <<'PY'
import sys, tomllib, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
overlay = sys.argv[2]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
config = tomllib.loads(by_kind["ConfigMap"][0]["data"]["quorum.toml"])
pod = by_kind["Deployment"][0]["spec"]["template"]["spec"]
main = pod["containers"][0]
grace = config["server"]["grace_period_secs"]
pre_stop = main["lifecycle"]["preStop"]["sleep"]["seconds"]
assert pod["terminationGracePeriodSeconds"] >= pre_stop + grace + 5, \
    f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} < preStop {pre_stop} + grace {grace} + 5"
assert main["readinessProbe"]["grpc"]["service"] == "", "readiness is the overall health entry"
assert main["livenessProbe"]["grpc"]["service"] == "liveness"
port = int(config["server"]["listen"].rsplit(":", 1)[1])
assert main["readinessProbe"]["grpc"]["port"] == port, "probes on the gRPC port"
# Fail closed: the API needs the token from a Secret that must exist, and nothing opens it.
token = [e for e in main["env"] if e["name"] == "QUORUM_AUTH_TOKEN"]
assert token and "secretKeyRef" in token[0].get("valueFrom", {}), "the token comes from a Secret"
assert not token[0]["valueFrom"]["secretKeyRef"].get("optional", False), "the token Secret is required"
assert not config["server"].get("allow_unauthenticated", False), "no overlay serves without a token"
assert not any(e["name"] == "QUORUM_ALLOW_UNAUTHENTICATED" for e in main["env"]), "nor by environment"
# Scrapers reach metrics without the API: the scrape port serves only metrics and probes, and
# what Prometheus is pointed at (ServiceMonitor, annotation) is that port.
scrape = int(config["server"]["scrape_listen"].rsplit(":", 1)[1])
http = int(config["server"]["metrics_listen"].rsplit(":", 1)[1])
assert scrape != http
ports = {p["name"]: p["containerPort"] for p in main["ports"]}
assert ports["metrics"] == scrape, "the port named metrics is the scrape port"
monitor = by_kind["ServiceMonitor"][0]["spec"]["endpoints"]
assert all(e["port"] == "metrics" for e in monitor), "Prometheus scrapes the scrape port"
template = by_kind["Deployment"][0]["spec"]["template"]["metadata"]
assert template["annotations"]["prometheus.io/port"] == str(scrape)
policy = by_kind["NetworkPolicy"][0]["spec"]["ingress"]
monitoring = [r for r in policy if any("namespaceSelector" in f and f["namespaceSelector"].get("matchLabels") for f in r["from"])]
assert monitoring and all(p["port"] == "metrics" for r in monitoring for p in r["ports"]), \
    "the monitoring namespace reaches only the scrape port"
if overlay == "gpu":
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert all(m.get("device", "").startswith("cuda") for m in config["models"]), "GPU models on CUDA"
names = {d["kind"] + "/" + d["metadata"]["name"] for d in docs}
print(f"check-deploy: {overlay}: {len(docs)} objects valid ({', '.join(sorted(names))})")
PY
done
