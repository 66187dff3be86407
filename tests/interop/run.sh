#!/usr/bin/env bash
# Interop suite: start the server binary and drive it with
#   - grpcio-reflection/health (reflection_check.py),
#   - the official A2A Python SDK client (sdk_interop.py) over gRPC, JSON-RPC and HTTP+JSON,
#   - the same SDK's gRPC transport resuming a cut stream (resume_interop.py),
#   - the official A2A JS SDK client (js/interop.mjs) over JSON-RPC, HTTP+JSON and gRPC,
#   - the signed Agent Card verified with Python's rfc8785 and cryptography
#     (card_signature_check.py; it starts a server of its own with --card-signing-key).
# Both SDK clients start from the server's Agent Card and pick each interface from it.
#
# Usage: tests/interop/run.sh [path-to-server-binary]
#   default binary: target/debug/a2a-server (relative to the repo root)
# Env:
#   INTEROP_VENV   venv location (default: target/interop-venv)
#   PYTHON         interpreter used to create the venv (default: python3)
#   NODE, NPM      Node.js (>= 20) and npm used for the JS client (default: node, npm)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

bin="${1:-target/debug/a2a-server}"
venv="${INTEROP_VENV:-target/interop-venv}"
python="${PYTHON:-python3}"
req="tests/interop/requirements.txt"
log="target/interop-server.log"
node="${NODE:-node}"
npm="${NPM:-npm}"
jsdir="tests/interop/js"

if [[ ! -x "$bin" ]]; then
    echo "interop: server binary '$bin' not found or not executable (build it first)" >&2
    exit 2
fi
mkdir -p target

# --- venv (reinstalled only when requirements.txt changes) -------------------
# shellcheck source=tests/interop/venv.sh
source "$here/venv.sh"
prepare_venv

# --- JS client deps (npm ci from the lock file, only when it changes) ---------
# Any failure here is reported as a FAIL line below instead of aborting the run,
# so the Python checks still run.
js_error=""
if ! command -v "$node" >/dev/null 2>&1 || ! command -v "$npm" >/dev/null 2>&1; then
    js_error="node/npm not found (need Node.js >= 20 with npm)"
elif ! "$node" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    js_error="Node.js $("$node" --version) is too old (need >= 20)"
else
    lock_hash="$(sha256sum "$jsdir/package-lock.json" | cut -c1-16)"
    js_stamp="$jsdir/node_modules/.interop-lock-$lock_hash"
    if [[ ! -f "$js_stamp" ]]; then
        echo "interop: installing JS client deps (npm ci in $jsdir)"
        if (cd "$jsdir" && "$npm" ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
            touch "$js_stamp"
        else
            js_error="npm ci failed in $jsdir"
        fi
    fi
fi

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

base_url="http://$addr"
echo "interop: starting $bin --listen $addr --public-url $base_url (log: $log)"
# --public-url: the Agent Card's interface URLs name the address the clients really reach.
"$bin" --listen "$addr" --public-url "$base_url" >"$log" 2>&1 &
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
for binding in GRPC JSONRPC HTTP+JSON; do
    echo "== sdk_interop.py $binding (Python SDK)"
    "$py" tests/interop/sdk_interop.py "$binding" "$base_url" | tee -a "$out" || status=1
done
echo "== resume_interop.py (Python SDK gRPC transport + resume extension)"
"$py" tests/interop/resume_interop.py "$base_url" | tee -a "$out" || status=1
echo "== js/interop.mjs JSONRPC HTTP+JSON GRPC (JS SDK)"
if [[ -n "$js_error" ]]; then
    echo "FAIL - [js] JS SDK client: $js_error" | tee -a "$out"
    status=1
else
    "$node" "$jsdir/interop.mjs" "$base_url" JSONRPC HTTP+JSON GRPC | tee -a "$out" || status=1
fi
echo "== card_signature_check.py (signed Agent Card: rfc8785 + cryptography)"
"$py" tests/interop/card_signature_check.py "$bin" | tee -a "$out" || status=1
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
