#!/usr/bin/env python3
"""Runs the README's "Google ADK" Python snippets, as a reader would paste them.

Usage: readme_adk.py README.md BASE_URL
  BASE_URL  a server started with --card-interfaces jsonrpc,http-json

The ```python blocks of the section are joined in order (the second reuses `ask` from the
first), `http://localhost:50051` is replaced by BASE_URL, and the result runs with this
interpreter. It must print `hello`, then `hello again`, and nothing else.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from importlib.metadata import version

LABEL = f'adk {version("google-adk")}/a2a-sdk {version("a2a-sdk")} | README "Google ADK" snippets'


def main() -> int:
    readme, base_url = sys.argv[1], sys.argv[2]
    text = open(readme, encoding='utf-8').read()
    section = re.search(r'^## Google ADK\n(.*?)^## ', text, re.S | re.M)
    blocks = re.findall(r'^( *)```python\n(.*?)^\1```', section.group(1), re.S | re.M) if section else []
    if len(blocks) != 2:
        print(f'FAIL - [{LABEL}] README snippets: expected 2 python blocks in the section, found {len(blocks)}')
        return 1
    source = '\n'.join(textwrap.dedent(code) for _, code in blocks)
    source = source.replace('http://localhost:50051', base_url)
    run = subprocess.run(
        [sys.executable, '-W', 'ignore', '-c', source], capture_output=True, text=True, timeout=60
    )
    ok = run.returncode == 0 and run.stdout.splitlines() == ['hello', 'hello again']
    detail = 'card URL printed "hello", card object printed "hello again"' if ok else (
        f'exit {run.returncode}, stdout {run.stdout!r}, stderr tail {run.stderr[-600:]!r}'
    )
    print(f'{"ok" if ok else "FAIL"} - [{LABEL}] README snippets: {detail}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
