"""/metrics read by Prometheus' own text-format parser (prometheus_client), after the other HTTP
checks have run traffic through the server: every family a dashboard charts is there with its
type, and the samples say what that traffic was.

Every metric the Grafana dashboard (deploy/grafana/quorum-dashboard.json) charts must be served.

Usage: python metrics_check.py URL DASHBOARD.json
"""

import json
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

text = urllib.request.urlopen(sys.argv[1], timeout=30).read().decode()
families = {f.name: f for f in text_string_to_metric_families(text)}

expected = {
    # prometheus_client drops a counter's `_total` from the family name.
    "quorum_rpc_requests": "counter",
    "quorum_rpc_duration_seconds": "histogram",
    "quorum_http_requests": "counter",
    "quorum_http_response_head_seconds": "histogram",
    "quorum_engine_time_to_first_token_seconds": "histogram",
    "quorum_engine_inter_token_latency_seconds": "histogram",
    "quorum_engine_queue_time_seconds": "histogram",
    "quorum_engine_request_prompt_tokens": "histogram",
    "quorum_engine_request_generation_tokens": "histogram",
    "quorum_engine_requests_finished": "counter",
    "quorum_engine_adapter_requests": "counter",
    "quorum_engine_running": "gauge",
    "quorum_engine_kv_usage": "gauge",
    "quorum_text2sql_answers": "counter",
    "quorum_text2sql_selector_calls": "counter",
    "quorum_text2sql_candidates": "counter",
    "quorum_text2sql_stage_seconds": "histogram",
    "quorum_rpc_time_to_first_message_seconds": "histogram",
    "quorum_engine_request_prefill_seconds": "histogram",
    "quorum_engine_request_decode_seconds": "histogram",
    "quorum_pipeline_generator_info": "gauge",
    "quorum_pipeline_selector_info": "gauge",
    "quorum_databases": "gauge",
    "quorum_build_info": "gauge",
    "quorum_ready": "gauge",
    "quorum_unauthenticated_open": "gauge",
}
wrong = {name: (families[name].type if name in families else None, kind)
         for name, kind in expected.items()
         if name not in families or families[name].type != kind}
assert not wrong, f"families missing or of the wrong type (found, expected): {wrong}"


def samples(name, suffix=""):
    return [s for s in families[name].samples if s.name == name + suffix]


generators = {s.labels["generator"]: s.labels["adapter"] for s in samples("quorum_pipeline_generator_info")}
assert generators == {"qwen-rep": "rep-s2", "qwen-ddl": ""}, generators
# concert_singer from the configuration, pets_http registered over HTTP by openapi_check.py.
assert samples("quorum_databases")[0].value == 2
assert samples("quorum_unauthenticated_open")[0].value == 0, "the server has a token"
adapters = {s.labels["adapter"]: s.value for s in samples("quorum_engine_adapter_requests", "_total")}
assert adapters.get("rep-s2", 0) >= 1 and adapters.get("", 0) >= 1, adapters
reasons = {s.labels["reason"] for s in samples("quorum_engine_requests_finished", "_total")}
assert reasons & {"stop", "length"}, reasons
answers = sum(s.value for s in samples("quorum_text2sql_answers", "_total"))
assert answers >= 3, answers
http = {(s.labels["route"], s.labels["status"]) for s in samples("quorum_http_requests", "_total")}
for expected_pair in [("/v1/chat/completions", "200"), ("/v1/chat/completions", "401"),
                      ("/v1/sql", "429"), ("/v1/completions", "413")]:
    assert expected_pair in http, (expected_pair, sorted(http))
ttft = [s for s in samples("quorum_engine_time_to_first_token_seconds", "_count") if s.value > 0]
assert ttft, "no time to first token observed"
stages = {s.labels["stage"]: s.value for s in samples("quorum_text2sql_stage_seconds", "_count")}
assert all(stages.get(k, 0) >= answers for k in ("round1", "total")), (stages, answers)
assert stages.get("queue", 0) >= answers, stages
first = {s.labels["method"]: s.value for s in samples("quorum_rpc_time_to_first_message_seconds", "_count")}
assert first.get("Inference/Generate", 0) >= 1 and first.get("Text2Sql/GenerateStream", 0) >= 1, first
for name in ("quorum_engine_request_prefill_seconds", "quorum_engine_request_decode_seconds"):
    assert any(s.value > 0 for s in samples(name, "_count")), f"no {name} observed"
dashboard = json.load(open(sys.argv[2]))
charted = {re.sub(r"_(bucket|total)$", "", name)
           for panel in dashboard["panels"] for target in panel["targets"]
           for name in re.findall(r"quorum_[a-z0-9_]+", target["expr"])}
unserved = sorted(charted - set(families))
assert not unserved, f"the dashboard charts metrics the server does not serve: {unserved}"
print(f"metrics: {len(families)} families parsed, the dashboard's {len(charted)} all served; {int(answers)} text-to-SQL answers; adapters {adapters}")
