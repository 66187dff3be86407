#!/usr/bin/env bash
# Fuzz smoke run: builds every cargo-fuzz target and runs each briefly from its committed
# corpus (fuzz/corpus/<target>), so a decoder change that panics, hangs or breaks an invariant
# on a known input fails CI. Inputs found during the run go to a scratch directory; the
# committed corpus is not touched. A crash leaves its input in fuzz/artifacts/<target>/.
#
#   fuzz/smoke.sh            every target, FUZZ_SMOKE_SECS (default 20) seconds each
#   fuzz/smoke.sh jsonrpc    one target
#
# Needs the nightly toolchain (cargo-fuzz uses sanitizer flags); installs cargo-fuzz when
# missing. Outside CI a missing nightly toolchain skips the run with a message; under CI=true
# it is installed (rustup, minimal profile).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SMOKE_SECS:-20}"
export CARGO_INCREMENTAL=0

if ! cargo +nightly --version >/dev/null 2>&1; then
  if [[ "${CI:-}" != true ]]; then
    echo "fuzz smoke: skipped, no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 0
  fi
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
# One build of every target (they share the dependency build); `run` then reuses it.
cargo +nightly fuzz build

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  printf '\n--> %s (%ss)\n' "$target" "$secs"
  mkdir -p "$scratch/$target"
  status=0
  cargo +nightly fuzz run "$target" "$scratch/$target" "fuzz/corpus/$target" -- \
    -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    >"$scratch/$target.log" 2>&1 || status=$?
  grep -E '^(INFO: seed corpus|#[0-9]+ +DONE|stat::number_of_executed_units)' "$scratch/$target.log" || true
  if [[ $status -ne 0 ]]; then
    tail -n 60 "$scratch/$target.log" >&2
    echo "fuzz smoke: $target failed; the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "fuzz smoke: ${#targets[@]} targets ran clean"
