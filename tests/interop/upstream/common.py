"""SDK-independent parts of the upstream test agents (agent_v10.py, agent_v03.py).

The two agents run in different venvs (a2a-sdk 1.x and 0.3), so this module imports
nothing from `a2a`: only the command grammar and the uvicorn start-up live here.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

from dataclasses import dataclass

import uvicorn

# A `slow` task gives up after this long if nobody cancels it.
SLOW_LIMIT_S = 120.0

ASK_QUESTION = 'Which city?'
ASK_AGAIN_QUESTION = 'Which city, really?'


@dataclass(frozen=True)
class Command:
    """What the first word of a user message asks for."""

    kind: str  # echo | stream | ask | slow | reply | fail
    count: int = 0  # stream: number of chunks
    delay_ms: int = 0  # stream: pause before every chunk but the first


def parse_command(text: str) -> Command:
    words = text.split()
    head = words[0].lower() if words else ''
    if head == 'stream':
        count = _int_arg(words, 1, 3)
        delay = _int_arg(words, 2, 0)
        return Command('stream', count=count, delay_ms=delay)
    if head in ('ask', 'slow', 'reply', 'fail'):
        return Command(head)
    # Unknown words fall back to echo so any text gets a well-formed task.
    return Command('echo')


def _int_arg(words: list[str], index: int, default: int) -> int:
    try:
        return max(0, int(words[index]))
    except (IndexError, ValueError):
        return default


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        '--port',
        type=int,
        required=True,
        help='TCP port on 127.0.0.1 (0 picks a free one; READY reports it)',
    )
    parser.add_argument(
        '--no-streaming',
        action='store_true',
        help='advertise capabilities.streaming = false',
    )
    return parser.parse_args()


def bind(port: int) -> tuple[socket.socket, int]:
    """Binds before the card is built, so `--port 0` still yields a correct card URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', port))
    sock.listen(128)
    sock.setblocking(False)
    return sock, sock.getsockname()[1]


def serve(app, sock: socket.socket, port: int) -> None:
    """Runs `app` on `sock`; prints `READY <port>` once uvicorn accepts requests."""
    config = uvicorn.Config(app, log_level='warning', lifespan='on')
    server = uvicorn.Server(config)

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if serving.done():
                # Start-up failed: surface uvicorn's exception (or exit code).
                serving.result()
                sys.exit(1)
            await asyncio.sleep(0.01)
        print(f'READY {port}', flush=True)
        await serving

    asyncio.run(main())
