# Shared by scripts/replicas_test.sh and scripts/replicas_load.sh
# (sourced, not run): N
# `quorum serve` replicas (SmolLM2) on loopback ports behind nginx's gRPC proxy (Debian's
# nginx). The caller sets `repo`, `work` (a scratch directory), `target` and `free_port`, and
# keeps `pids` (replica pids, then nginx's) to clean up.

# start_replicas N: starts N replicas; their ports go to `ports`, their pids to `pids`.
start_replicas() {
    local n=$1 i port
    local models="${QUORUM_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/models}"
    local spider="${QUORUM_SPIDER_DIR:-$repo/../shared/data/spider}"
    ports=()
    for ((i = 0; i < n; i++)); do
        port="$(free_port)"
        ports+=("$port")
        cat > "$work/replica$i.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
metrics_listen = ""
grace_period_secs = 60

[[models]]
name = "smol"
source = "$models/smollm2-135m-instruct-q4_1.gguf"
roles = ["generator"]

[databases.entries]
concert_singer = "$spider/database/concert_singer/concert_singer.sqlite"
TOML
        "$target/debug/quorum" serve --config "$work/replica$i.toml" 2>"$work/replica$i.log" &
        pids+=("$!")
    done
}

# start_nginx: nginx on a free port (`lb_port`) in front of every port in `ports`.
start_nginx() {
    local upstreams="" port
    if ! command -v nginx >/dev/null; then
        echo "installing nginx (Debian)" >&2
        apt-get install -y -q nginx >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q nginx >/dev/null; }
    fi
    for port in "${ports[@]}"; do
        upstreams+="        server 127.0.0.1:$port max_fails=1 fail_timeout=30s;"$'\n'
    done
    lb_port="$(free_port)"
    mkdir -p "$work/nginx"
    cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events {}
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    upstream quorum {
$upstreams    }
    server {
        listen 127.0.0.1:$lb_port http2;
        location / {
            grpc_pass grpc://quorum;
            # A replica that refuses the connection (killed) is skipped before anything was
            # sent; a call that reached a replica is the client's to retry.
            grpc_next_upstream error timeout;
            grpc_read_timeout 300s;
        }
    }
}
NGINX
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
    pids+=("$!")
}
