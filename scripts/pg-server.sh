#!/usr/bin/env bash
# A private PostgreSQL server for tests and evaluation, from the distribution's packages: no
# system service, no default port, nothing outside DIR.
#
#   scripts/pg-server.sh start DIR   initialize a cluster in DIR (once), start it on a Unix socket
#                                     in DIR and 127.0.0.1 on a free port, print its admin URL
#   scripts/pg-server.sh stop DIR    stop it (fast shutdown)
#
# Password authentication (SCRAM) everywhere; the admin password is generated into DIR. As
# root (PostgreSQL refuses to run as root) the server runs as the `postgres` user. When no
# server binaries are found and apt-get is available (CI), the `postgresql` package is
# installed first.
#
# With PG_TLS=1 at the first start, TCP clients must use TLS (`hostssl` only): a private CA
# (DIR/tls/ca.pem) signs the server's certificate, which names 127.0.0.1 and no host name.
set -euo pipefail
cmd=${1:?usage: pg-server.sh start|stop DIR}
dir=${2:?usage: pg-server.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

find_bindir() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  return 1
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "pg-server: installing PostgreSQL from Debian's packages" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bindir=$(find_bindir)
  else
    echo "pg-server: no PostgreSQL server binaries (install the postgresql package)" >&2
    exit 1
  fi
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
  as_owner=(runuser -u postgres --)
  chown postgres "$dir"
fi
run() { "${as_owner[@]}" "$@"; }

case "$cmd" in
  start)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
      printf '%s\n' "$password" >"$dir/admin-password"
      chmod 600 "$dir/admin-password"
      [ ${#as_owner[@]} -gt 0 ] && chown postgres "$dir/admin-password"
      run "$bindir/initdb" -D "$dir/data" -U quorum_admin --auth=scram-sha-256 \
        --pwfile="$dir/admin-password" -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
      if [ "${PG_TLS:-0}" = 1 ]; then
        bash "$(dirname "$0")/tls-test-certs.sh" "$dir/tls"
        [ ${#as_owner[@]} -gt 0 ] && chown -R postgres "$dir/tls"
        sed -i 's/^host /hostssl /' "$dir/data/pg_hba.conf"
        cat >>"$dir/data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = '$dir/tls/server.pem'
ssl_key_file = '$dir/tls/server.key'
CONF
      fi
    fi
    # A restarted cluster keeps its port, so clients' URLs stay valid.
    if [ -f "$dir/port" ]; then
      port=$(cat "$dir/port")
    else
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    run "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
      start >/dev/null || { tail -20 "$dir/server.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    echo "postgresql://quorum_admin:$(cat "$dir/admin-password")@127.0.0.1:$port/postgres"
    ;;
  stop)
    run "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  *)
    echo "usage: pg-server.sh start|stop DIR" >&2; exit 2
    ;;
esac
