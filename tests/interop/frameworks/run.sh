#!/usr/bin/env bash
# Framework suite: the server driven by the A2A clients of agent frameworks, as their users
# write them, each framework in its own pinned venv (requirements-*.txt; reinstalled only when
# its file changes):
#   - google-adk (adk_client.py): RemoteA2aAgent as the root agent of an InMemoryRunner (it
#     calls the remote agent itself: no model, no LLM), on a2a-sdk 1.x and on a2a-sdk 0.3:
#       * card URL against the default card: ADK refuses it (gRPC is a bare host:port);
#       * card object (fetched by the application) against the default card;
#       * card URL against a server started with --card-interfaces jsonrpc,http-json,
#         over JSON-RPC and over HTTP+JSON;
#       * the README's "Google ADK" snippets (readme_adk.py), against the second server;
#   - google-adk as an upstream (adk_upstream.py), on a2a-sdk 1.x and on a2a-sdk 0.3: a no-LLM
#     ADK agent served with to_a2a, fronted by a server of its own (--agent a2a --upstream) and
#     driven by the venv's a2a-sdk client over JSON-RPC: the relayed card, send, stream, the
#     next turn in the same context (the same ADK session), a failing task;
#   - strands-agents (strands_client.py): A2AAgent against the default card, over JSON-RPC
#     and HTTP+JSON.
# Scenarios for each client: send (blocking answer), stream (chunks arrive as produced),
# input-required then the answer on the same task, a failing task. Two servers (default card,
# --card-interfaces jsonrpc,http-json) on free loopback ports, stopped at the end (adk_upstream.py
# starts and stops its ADK agent and relay itself). Prints a table of the results.
#
# Usage: tests/interop/frameworks/run.sh [path-to-server-binary]   (default: target/debug/a2a-server)
# Env: FRAMEWORKS_VENV_DIR (venvs' parent, default target), PYTHON (creates the venvs,
#      default python3). Under CI=true everything must run; outside CI a missing prerequisite
#      (python3, PyPI, the server's --card-interfaces flag) skips its part with a loud message.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

bin="${1:-target/debug/a2a-server}"
venv_dir="${FRAMEWORKS_VENV_DIR:-target}"
python="${PYTHON:-python3}"
ci="${CI:-}"
started=$SECONDS

if [[ ! -x "$bin" ]]; then
    echo "frameworks: server binary '$bin' not found or not executable (build it first)" >&2
    exit 2
fi
mkdir -p target

# A prerequisite is missing: fatal under CI, a loud skip otherwise.
missing() {
    if [[ "$ci" == "true" ]]; then
        echo "frameworks: FAIL: $* (CI=true: nothing may be skipped)" >&2
        exit 1
    fi
    printf '\n!!!!!!!! frameworks: SKIPPED: %s !!!!!!!!\n\n' "$*" >&2
}

if ! command -v "$python" >/dev/null 2>&1; then
    missing "$python not found: no framework client can run"
    exit 0
fi

# --- venvs, one per framework, prepared in parallel ---------------------------
# shellcheck source=tests/interop/venv.sh
source "$here/../venv.sh"
frameworks=(adk adk-a2a03 strands)
declare -A install_pid
for fw in "${frameworks[@]}"; do
    (
        venv="$venv_dir/frameworks-venv-$fw"
        req="$here/requirements-$fw.txt"
        prepare_venv
    ) >"target/frameworks-venv-$fw.log" 2>&1 &
    install_pid[$fw]=$!
done
ready=()
for fw in "${frameworks[@]}"; do
    if wait "${install_pid[$fw]}"; then
        ready+=("$fw")
    else
        tail -n 30 "target/frameworks-venv-$fw.log" >&2
        missing "the $fw venv could not be prepared (pip install -r tests/interop/frameworks/requirements-$fw.txt; log above)"
    fi
done
echo "frameworks: venvs ready: ${ready[*]:-none} ($((SECONDS - started)) s; logs target/frameworks-venv-*.log)"
if (( ${#ready[@]} == 0 )); then
    exit 0
fi
has() { [[ " ${ready[*]} " == *" $1 "* ]]; }

# --- servers -----------------------------------------------------------------
free_port() {
    "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
server_pids=()
cleanup() {
    for pid in "${server_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${server_pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME EXTRA_ARGS…: starts the binary on a free port; sets $url.
start_server() {
    local name="$1" port log pid deadline
    shift
    port="$(free_port)"
    url="http://127.0.0.1:$port"
    log="target/frameworks-server-$name.log"
    echo "frameworks: $bin --listen 127.0.0.1:$port --public-url $url${*:+ $*} (log: $log)"
    "$bin" --listen "127.0.0.1:$port" --public-url "$url" "$@" >"$log" 2>&1 &
    pid=$!
    server_pids+=("$pid")
    deadline=$((SECONDS + 30))
    until "$python" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || (( SECONDS >= deadline )); then
            echo "frameworks: the $name server did not start on 127.0.0.1:$port" >&2
            tail -n 60 "$log" >&2 || true
            exit 1
        fi
        sleep 0.1
    done
}

start_server default
default_url="$url"
# ADK refuses a card fetched over the network that lists gRPC as a bare host:port; the flag
# leaves gRPC out of the card.
if "$bin" --help 2>&1 | grep -q -- '--card-interfaces'; then
    start_server card-interfaces --card-interfaces jsonrpc,http-json
    flag_url="$url"
elif [[ "$ci" == "true" ]]; then
    echo "frameworks: $bin has no --card-interfaces: the ADK-by-card-URL checks fail" >&2
    flag_url="-"
else
    missing "$bin has no --card-interfaces: the ADK-by-card-URL checks are skipped"
    flag_url="skip"
fi

# --- the clients -------------------------------------------------------------
status=0
out="target/frameworks-results.txt"
: >"$out"
run_client() {
    local fw="$1" script="$2" err="target/frameworks-$1-${2%.py}.stderr"
    shift 2
    echo "== $script ($fw: $(grep -v '^#' "$here/requirements-$fw.txt" | xargs))"
    if has "$fw"; then
        "$venv_dir/frameworks-venv-$fw/bin/python" "$here/$script" "$@" \
            2>"$err" | tee -a "$out" || {
            status=1
            tail -n 40 "$err" >&2
        }
    else
        echo "SKIP - [$fw] all: venv not prepared" | tee -a "$out"
    fi
}
for fw in adk adk-a2a03; do
    run_client "$fw" adk_client.py "$default_url" "$flag_url"
    case "$flag_url" in
        -) echo "FAIL - [$fw] README snippets: no server with --card-interfaces" | tee -a "$out"; status=1 ;;
        skip) echo "SKIP - [$fw] README snippets: no server with --card-interfaces" | tee -a "$out" ;;
        *) run_client "$fw" readme_adk.py README.md "$flag_url" ;;
    esac
    run_client "$fw" adk_upstream.py "$bin"
done
run_client strands strands_client.py "$default_url"

for pid in "${server_pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "frameworks: a server process died during the checks" >&2
        status=1
    fi
done

# --- the table ---------------------------------------------------------------
"$python" - "$out" <<'EOF'
import re, sys
columns = ['card refused', 'relayed card', 'send', 'stream', 'input→answer', 'next turn', 'fail', 'README snippets']
every = ['send', 'stream', 'input→answer', 'fail']  # what a client's `all` line stands for
rows: dict[str, dict[str, str]] = {}
for line in open(sys.argv[1], encoding='utf-8'):
    m = re.match(r'^(ok|FAIL|SKIP) - \[(.*?)\] (.*?): ', line)
    if not m:
        continue
    verdict, label, scenario = m.groups()
    cells = rows.setdefault(label, {})
    for column in every if scenario == 'all' else [scenario]:
        cells[column] = verdict
width = max([len(label) for label in rows] + [6])
print()
print(f'{"client":<{width}} | ' + ' | '.join(columns))
print('-' * width + '-|-' + '-|-'.join('-' * len(c) for c in columns))
for label, cells in rows.items():
    print(f'{label:<{width}} | ' + ' | '.join(f'{cells.get(c, "-"):<{len(c)}}' for c in columns))
EOF
n_ok="$(grep -c '^ok - ' "$out" || true)"
n_fail="$(grep -c '^FAIL - ' "$out" || true)"
n_skip="$(grep -c '^SKIP - ' "$out" || true)"
if (( status != 0 )); then
    for log in target/frameworks-server-*.log; do
        echo "---- server log tail ($log) ----"
        tail -n 40 "$log" || true
    done
    (( n_fail > 0 )) || n_fail=1
fi
echo "frameworks: $n_ok passed, $n_fail failed, $n_skip skipped ($((SECONDS - started)) s)"
exit "$status"
