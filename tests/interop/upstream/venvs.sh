#!/usr/bin/env bash
# Prepares the two Python venvs the upstream test agents run in: a2a-sdk 1.x (agent_v10.py)
# and a2a-sdk 0.3 (agent_v03.py). Same locations and requirements as the interop suites, so
# a run of either suite and the Rust upstream tests share one install.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
mkdir -p target

python="${PYTHON:-python3}"
# shellcheck source=tests/interop/venv.sh
source tests/interop/venv.sh

venv="${INTEROP_VENV:-target/interop-venv}"
req="tests/interop/requirements.txt"
prepare_venv

venv="${INTEROP_VENV_V03:-target/interop-venv-v03}"
req="tests/interop/v03/requirements.txt"
prepare_venv
