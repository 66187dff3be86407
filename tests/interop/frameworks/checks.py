"""The frameworks suite's scenario bookkeeping, shared by its clients: one line per scenario
(`ok - [label] scenario: detail` or `FAIL - …`), a timeout per scenario, and the exit status."""
from __future__ import annotations

import asyncio
import sys
import traceback

SCENARIO_TIMEOUT = 30.0

results: list[bool] = []


def report(label: str, scenario: str, ok: bool, detail: str) -> None:
    results.append(ok)
    print(f'{"ok" if ok else "FAIL"} - [{label}] {scenario}: {detail}', flush=True)


async def check(label: str, scenario: str, body) -> None:
    """Runs `body` (returning `(ok, detail)`) as one scenario; an exception is a FAIL line."""
    try:
        ok, detail = await asyncio.wait_for(body(), SCENARIO_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - every failure is a FAIL line
        ok, detail = False, f'{type(exc).__name__}: {exc}'
        traceback.print_exc(file=sys.stderr)
    report(label, scenario, ok, detail)


def tally() -> int:
    """Prints the tally; the exit status: 0 when every scenario passed."""
    passed = sum(results)
    print(f'{passed} passed, {len(results) - passed} failed')
    return 0 if all(results) else 1
