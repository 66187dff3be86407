#!/usr/bin/env bash
# The mission's deployment, end to end: nginx (deploy/nginx/nginx.conf, the same file
# deploy/compose.yaml runs) balancing gRPC and HTTP per call over three replicas on one
# redis-server, driven through nginx by the official Python SDK client over gRPC, JSON-RPC and
# HTTP+JSON (fleet_interop.py). The Agent Card names nginx, so the SDK reaches every replica.
#
# Usage: tests/interop/fleet.sh [path-to-server-binary]
#   default binary: target/debug/a2a-server (relative to the repo root)
# Env:
#   INTEROP_VENV   venv location (default: target/interop-venv, shared with run.sh)
#   PYTHON         interpreter used to create the venv (default: python3)
#   NGINX          nginx binary (default: nginx, then /usr/sbin/nginx)
#   CI=true        a missing nginx or redis-server is a failure instead of a loud skip
#
# Everything it starts (redis-server, the replicas, nginx) lives in a temporary directory and
# is stopped, and the directory removed, when the script exits for any reason.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

bin="${1:-target/debug/a2a-server}"
venv="${INTEROP_VENV:-target/interop-venv}"
python="${PYTHON:-python3}"
req="tests/interop/requirements.txt"
replicas=3
lease_ms=2000

# --- what it needs ------------------------------------------------------------
nginx="${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"
missing=()
[[ -x "$nginx" ]] || missing+=("nginx (apt-get install nginx-light)")
command -v redis-server >/dev/null || missing+=("redis-server (apt-get install redis-server)")
command -v redis-cli >/dev/null || missing+=("redis-cli (apt-get install redis-server)")
if (( ${#missing[@]} > 0 )); then
    if [[ "${CI:-}" == "true" ]]; then
        echo "fleet: missing ${missing[*]}, and CI=true: the fleet end-to-end test must run in CI" >&2
        exit 1
    fi
    printf '\n*** SKIPPED: the fleet end-to-end test needs %s ***\n\n' "${missing[*]}" >&2
    exit 0
fi
if [[ ! -x "$bin" ]]; then
    echo "fleet: server binary '$bin' not found or not executable (build it first)" >&2
    exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
mkdir -p target

# shellcheck source=tests/interop/venv.sh
source "$here/venv.sh"
prepare_venv

# --- clean-up, whatever happens ------------------------------------------------
work="$(mktemp -d -t a2a-fleet.XXXXXX)"
# nginx's workers may run as another user: they must reach the prefix's temp directories.
chmod 755 "$work"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show_logs() {
    local log
    for log in "$work"/*.log; do
        echo "---- $(basename "$log") (last ${1:-40} lines) ----"
        tail -n "${1:-40}" "$log" || true
    done
    echo "---- end of logs ----"
}

free_ports() {
    "$py" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Waits (bounded) until 127.0.0.1:PORT accepts connections while process PID lives.
wait_port() {
    local port="$1" pid="$2" what="$3" deadline=$((SECONDS + 30))
    until "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "fleet: $what exited before listening on port $port" >&2
            show_logs 100
            exit 1
        fi
        if (( SECONDS >= deadline )); then
            echo "fleet: $what did not listen on port $port within 30s" >&2
            show_logs 100
            exit 1
        fi
        sleep 0.1
    done
}

read -r redis_port grpc_port http_port p1 p2 p3 <<<"$(free_ports 6)"
replica_ports=("$p1" "$p2" "$p3")

# --- redis-server: in memory only -------------------------------------------
mkdir -p "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis" \
    >"$work/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port" "${pids[-1]}" "redis-server"
echo "fleet: redis-server on 127.0.0.1:$redis_port"

# --- three replicas, their card pointing at nginx ------------------------------
replica_urls=()
for i in $(seq 0 $((replicas - 1))); do
    port="${replica_ports[$i]}"
    "$bin" --listen "127.0.0.1:$port" \
        --store "redis://127.0.0.1:$redis_port/0" --redis-prefix "fleet-e2e-$$" \
        --lease-ms "$lease_ms" --replica-id "replica$i" \
        --public-url "http://127.0.0.1:$http_port" --public-grpc "127.0.0.1:$grpc_port" \
        >"$work/replica$i.log" 2>&1 &
    pids+=($!)
    replica_urls+=("http://127.0.0.1:$port")
done
for i in $(seq 0 $((replicas - 1))); do
    wait_port "${replica_ports[$i]}" "${pids[$((i + 1))]}" "replica$i"
done
echo "fleet: replicas on ${replica_urls[*]}"

# --- nginx: the deployed nginx.conf, with this run's upstreams and ports beside it ---
conf="$work/nginx"
mkdir -p "$conf/tmp"
# A symlink, not a copy: nginx resolves `include` against the directory of the path it was
# given, so the shared file picks up the generated files next to the link.
ln -s "$root/deploy/nginx/nginx.conf" "$conf/nginx.conf"
echo "listen 127.0.0.1:$grpc_port http2;" >"$conf/listen-grpc.conf"
echo "listen 127.0.0.1:$http_port;" >"$conf/listen-http.conf"
{
    for name in a2a_grpc a2a_http; do
        echo "upstream $name {"
        for port in "${replica_ports[@]}"; do
            echo "    server 127.0.0.1:$port max_fails=0;"
        done
        echo "    keepalive 16;"
        echo "}"
    done
} >"$conf/upstreams.conf"
if ! "$nginx" -t -q -e stderr -c "$conf/nginx.conf" -p "$conf/" 2>"$work/nginx.log"; then
    echo "fleet: nginx -t rejected deploy/nginx/nginx.conf with the generated includes:" >&2
    cat "$work/nginx.log" >&2
    exit 1
fi
"$nginx" -e stderr -c "$conf/nginx.conf" -p "$conf/" >>"$work/nginx.log" 2>&1 &
pids+=($!)
wait_port "$grpc_port" "${pids[-1]}" "nginx (gRPC)"
wait_port "$http_port" "${pids[-1]}" "nginx (HTTP)"
echo "fleet: nginx balancing gRPC on 127.0.0.1:$grpc_port and HTTP on 127.0.0.1:$http_port"

# --- the SDK client through nginx -----------------------------------------------
status=0
out="$work/checks.out"
echo "== fleet_interop.py GRPC JSONRPC HTTP+JSON (Python SDK, through nginx)"
"$py" tests/interop/fleet_interop.py "http://127.0.0.1:$http_port" "127.0.0.1:$grpc_port" "${replica_urls[@]}" \
    | tee "$out" || status=1
n_ok="$(grep -c '^ok - ' "$out" || true)"
n_fail="$(grep -c '^FAIL - ' "$out" || true)"

for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        echo "fleet: a process of the deployment died during the checks (#$i)" >&2
        status=1
    fi
done
if (( status != 0 )); then
    show_logs 60
    (( n_fail > 0 )) || n_fail=1
fi
echo "fleet: $n_ok passed, $n_fail failed"
exit "$status"
