#!/usr/bin/env bash
# v0.3 interop suite: start the server binary and drive it with the last v0.3 releases of the
# official clients, each installed apart from the v1.x ones:
#   - a2a-sdk==0.3.26 (py_interop.py) over JSON-RPC, HTTP+JSON and gRPC, in its own venv
#     (default target/interop-venv-v03), and as a webhook receiver (webhook.py: every push body
#     of a config set through v0.3 must be the v0.3 Task a2a-sdk 0.3's own server would send),
#   - @a2a-js/sdk@0.3.14 (js/interop.mjs) over JSON-RPC and HTTP+JSON, in its own
#     node_modules (npm ci from the lock file).
# Both start from the server's Agent Card, fetched as v0.3 clients fetch it (no A2A-Version).
#
# Usage: tests/interop/v03/run.sh [path-to-server-binary]   (default: target/debug/a2a-server)
# Env: INTEROP_VENV_V03, PYTHON, NODE, NPM. Prints `N passed, M failed`; non-zero on failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

bin="${1:-target/debug/a2a-server}"
venv="${INTEROP_VENV_V03:-target/interop-venv-v03}"
python="${PYTHON:-python3}"
req="tests/interop/v03/requirements.txt"
log="target/interop-v03-server.log"
node="${NODE:-node}"
npm="${NPM:-npm}"
jsdir="tests/interop/v03/js"

if [[ ! -x "$bin" ]]; then
    echo "interop v0.3: server binary '$bin' not found or not executable (build it first)" >&2
    exit 2
fi
mkdir -p target

# shellcheck source=tests/interop/venv.sh
source "$here/../venv.sh"
prepare_venv

js_error=""
if ! command -v "$node" >/dev/null 2>&1 || ! command -v "$npm" >/dev/null 2>&1; then
    js_error="node/npm not found (need Node.js >= 20 with npm)"
else
    js_stamp="$jsdir/node_modules/.interop-lock-$(sha256sum "$jsdir/package-lock.json" | cut -c1-16)"
    if [[ ! -f "$js_stamp" ]]; then
        echo "interop v0.3: installing JS client deps (npm ci in $jsdir)"
        if (cd "$jsdir" && "$npm" ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
            touch "$js_stamp"
        else
            js_error="npm ci failed in $jsdir"
        fi
    fi
fi

port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
addr="127.0.0.1:$port"
base_url="http://$addr"
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "interop v0.3: starting $bin --listen $addr --public-url $base_url --push --push-allow-private (log: $log)"
# --push: the push config methods are checked; --push-allow-private: their webhook is local
# (webhook.py's receiver listens on 127.0.0.1).
"$bin" --listen "$addr" --public-url "$base_url" --push --push-allow-private >"$log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 30))
until "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null || (( SECONDS >= deadline )); then
        echo "interop v0.3: server did not start on $addr" >&2
        tail -n 100 "$log" >&2 || true
        exit 1
    fi
    sleep 0.2
done

status=0
out="$(mktemp)"
for binding in JSONRPC HTTP+JSON GRPC; do
    echo "== py_interop.py $binding (a2a-sdk 0.3.26)"
    "$py" tests/interop/v03/py_interop.py "$binding" "$base_url" | tee -a "$out" || status=1
done
echo "== webhook.py (a2a-sdk 0.3.26's Task model as the webhook receiver)"
"$py" tests/interop/v03/webhook.py "$base_url" | tee -a "$out" || status=1
echo "== js/interop.mjs JSONRPC HTTP+JSON (@a2a-js/sdk 0.3.14)"
if [[ -n "$js_error" ]]; then
    echo "FAIL - [v0.3 js] JS SDK client: $js_error" | tee -a "$out"
    status=1
else
    "$node" "$jsdir/interop.mjs" "$base_url" JSONRPC HTTP+JSON | tee -a "$out" || status=1
fi
n_ok="$(grep -c '^ok - ' "$out" || true)"
n_fail="$(grep -c '^FAIL - ' "$out" || true)"
rm -f "$out"
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "interop v0.3: server process died during the checks" >&2
    status=1
fi
if (( status != 0 )); then
    echo "---- server log tail ($log) ----"
    tail -n 80 "$log" || true
    (( n_fail > 0 )) || n_fail=1
fi
echo "interop v0.3: $n_ok passed, $n_fail failed"
exit "$status"
