#!/usr/bin/env bash
# The /ui browser test: headless Debian chromium driven by Playwright for Python, against the
# real server binary. Installs chromium (apt) when missing under CI=true, and Playwright into
# its own venv under target/ (reinstalled only when requirements.txt changes).
# Usage: tests/ui/run.sh [path/to/a2a-server]
set -euo pipefail
cd "$(dirname "$0")/../.."
server="${1:-target/debug/a2a-server}"

if ! command -v chromium >/dev/null; then
  if [[ "${CI:-}" == "true" ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    printf '\n*** SKIPPED: the /ui browser test needs Debian chromium (apt-get install chromium) ***\n\n'
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
  fi
fi

venv=target/ui-venv
req=tests/ui/requirements.txt
stamp="$venv/.ui-requirements-$(sha256sum "$req" | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  echo "ui: preparing venv $venv"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  rm -f "$venv"/.ui-requirements-*
  touch "$stamp"
fi
exec "$venv/bin/python" -B tests/ui/browser_test.py --server "$server" --chromium "$(command -v chromium)"
