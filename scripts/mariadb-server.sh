#!/usr/bin/env bash
# A private MariaDB server for tests and evaluation, from the distribution's packages: no
# system service, no default port, nothing outside DIR.
#
#   scripts/mariadb-server.sh start DIR   initialize a server in DIR (once), start it on a Unix
#                                          socket in DIR and 127.0.0.1 on a free port, print its
#                                          admin URL (mysql://quorum_admin:PASSWORD@127.0.0.1:PORT)
#   scripts/mariadb-server.sh stop DIR    stop it
#
# Table names compare case-blind (`lower_case_table_names = 1`), as SQLite's do, so that SQL
# written for a SQLite database reads its copy unchanged. The admin password is generated into
# DIR. As root the server runs as the `mysql` user. When no server binaries are found and
# apt-get is available (CI), the `mariadb-server` package is installed first (and the system
# service it starts is stopped).
#
# With MARIADB_TLS=1 at the first start, TCP clients must use TLS (`require_secure_transport`):
# a private CA (DIR/tls/ca.pem) signs the server's certificate, which names 127.0.0.1 and no
# host name. A restarted server keeps TLS.
set -euo pipefail
cmd=${1:?usage: mariadb-server.sh start|stop DIR}
dir=${2:?usage: mariadb-server.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "mariadb-server: installing MariaDB from Debian's packages" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null \
      || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null; }
    service mariadb stop >/dev/null 2>&1 || true
  else
    echo "mariadb-server: no MariaDB server binaries (install the mariadb-server package)" >&2
    exit 1
  fi
fi
server=$(command -v mariadbd || echo /usr/sbin/mariadbd)
user=$(id -un)
if [ "$(id -u)" = 0 ]; then
  user=mysql
  chown mysql "$dir"
fi
sock="$dir/mysqld.sock"

case "$cmd" in
  start)
    fresh=0
    if [ ! -d "$dir/data/mysql" ]; then
      fresh=1
      mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
      head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$dir/admin-password"
      chmod 600 "$dir/admin-password"
      if [ "${MARIADB_TLS:-0}" = 1 ]; then
        bash "$(dirname "$0")/tls-test-certs.sh" "$dir/tls"
        [ "$user" = mysql ] && chown -R mysql "$dir/tls"
      fi
    fi
    tls=()
    if [ -f "$dir/tls/server.pem" ]; then
      tls=(--ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem"
        --ssl-key="$dir/tls/server.key" --require-secure-transport=ON)
    fi
    # A restarted server keeps its port, so clients' URLs stay valid.
    if [ -f "$dir/port" ]; then
      port=$(cat "$dir/port")
    else
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    "$server" --no-defaults --datadir="$dir/data" --user="$user" --socket="$sock" \
      --port="$port" --bind-address=127.0.0.1 --pid-file="$dir/mysqld.pid" \
      --lower-case-table-names=1 --skip-name-resolve --max-connections=200 \
      --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=0 \
      --log-error="$dir/server.log" "${tls[@]}" >/dev/null 2>&1 &
    for _ in $(seq 1 120); do
      mariadb-admin --no-defaults --socket="$sock" -uroot ping >/dev/null 2>&1 && break
      [ -f "$dir/admin-password" ] && mariadb-admin --no-defaults --socket="$sock" -uroot \
        -p"$(cat "$dir/admin-password")" ping >/dev/null 2>&1 && break
      sleep 0.5
    done
    password=$(cat "$dir/admin-password")
    if [ "$fresh" = 1 ]; then
      mariadb --no-defaults --socket="$sock" -uroot <<SQL
CREATE USER 'quorum_admin'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO 'quorum_admin'@'127.0.0.1' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED BY '$password';
SQL
    fi
    mariadb-admin --no-defaults --socket="$sock" -uroot -p"$password" ping >/dev/null \
      || { tail -20 "$dir/server.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    echo "mysql://quorum_admin:$password@127.0.0.1:$port"
    ;;
  stop)
    if [ -f "$dir/mysqld.pid" ]; then
      pid=$(cat "$dir/mysqld.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    ;;
  *)
    echo "usage: mariadb-server.sh start|stop DIR" >&2; exit 2
    ;;
esac
