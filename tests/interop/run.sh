#!/usr/bin/env bash
# Interop suite: start the server binary and drive it over gRPC with the
# official A2A Python SDK (grpc_interop.py) and grpcio-reflection/health
# (reflection_check.py).
#
# Usage: tests/interop/run.sh [path-to-server-binary]
#   default binary: target/debug/a2a-server (relative to the repo root)
# Env:
#   INTEROP_VENV   venv location (default: target/interop-venv)
#   PYTHON         interpreter used to create the venv (default: python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

bin="${1:-target/debug/a2a-server}"
venv="${INTEROP_VENV:-target/interop-venv}"
python="${PYTHON:-python3}"
req="tests/interop/requirements.txt"
log="target/interop-server.log"

if [[ ! -x "$bin" ]]; then
    echo "interop: server binary '$bin' not found or not executable (build it first)" >&2
    exit 2
fi
mkdir -p target

# --- venv (reinstalled only when requirements.txt changes) -------------------
req_hash="$(sha256sum "$req" | cut -c1-16)"
stamp="$venv/.interop-requirements-$req_hash"
if [[ ! -f "$stamp" ]]; then
    echo "interop: preparing venv $venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    rm -f "$venv"/.interop-requirements-*
    touch "$stamp"
fi
py="$venv/bin/python"

# --- start the server --------------------------------------------------------
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
addr="127.0.0.1:$port"

server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show_log() {
    echo "---- server log tail ($log) ----"
    tail -n "${1:-60}" "$log" || true
    echo "---- end of server log ----"
}

echo "interop: starting $bin --listen $addr (log: $log)"
"$bin" --listen "$addr" >"$log" 2>&1 &
server_pid=$!

# wait (bounded) until the port accepts TCP connections
deadline=$((SECONDS + 30))
until "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        wait "$server_pid" && rc=0 || rc=$?
        server_pid=""
        echo "interop: server exited (status $rc) before listening on $addr" >&2
        show_log 200
        exit 1
    fi
    if (( SECONDS >= deadline )); then
        echo "interop: server did not accept connections on $addr within 30s" >&2
        show_log 200
        exit 1
    fi
    sleep 0.2
done
echo "interop: server is listening on $addr"

# --- run the checks ----------------------------------------------------------
status=0
out="$(mktemp)"
echo "== reflection_check.py"
"$py" tests/interop/reflection_check.py "$addr" | tee -a "$out" || status=1
echo "== grpc_interop.py"
"$py" tests/interop/grpc_interop.py "$addr" | tee -a "$out" || status=1
n_ok="$(grep -c '^ok - ' "$out" || true)"
n_fail="$(grep -c '^FAIL - ' "$out" || true)"
rm -f "$out"

if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "interop: server process died during the checks" >&2
    status=1
fi

if (( status != 0 )); then
    show_log 80
    (( n_fail > 0 )) || n_fail=1
fi
echo "interop: $n_ok passed, $n_fail failed"
exit "$status"
