#!/usr/bin/env python3
"""A v0.3 webhook receiver checked with a2a-sdk 0.3.26's own model.

Usage: webhook.py BASE_URL     (a server started with --push --push-allow-private)

A v0.3 client (``ClientFactory`` over JSON-RPC, from the card) registers webhooks on a local
receiver two ways: ``tasks/pushNotificationConfig/set`` (``Client.set_task_callback``) for a
task waiting for input, and inline in ``message/send`` (``ClientConfig.push_notification_configs``).
Every body the receiver gets must be what a2a-sdk 0.3's own server posts
(``BasePushNotificationSender``: ``task.model_dump(mode='json', exclude_none=True)``): it must
validate as ``a2a.types.Task`` and dump back to exactly itself; the token must come in
``X-A2A-Notification-Token``. Each registration must see its task completed.

Output: ``ok - [v0.3 webhook] <name>`` or ``FAIL - …: <reason>`` per check, then
``N passed, M failed``. Exit status is non-zero if any check failed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from pydantic import ValidationError

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TextPart,
    TransportProtocol,
)

TAG = '[v0.3 webhook]'
results: list[bool] = []
# path -> [(headers, body)] and path -> [validation problems]
received: dict[str, list[tuple[dict[str, str], object]]] = {}
problems: dict[str, list[str]] = {}
lock = threading.Lock()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the http.server API
        raw = self.rfile.read(int(self.headers.get('content-length', '0')))
        problem = None
        try:
            body = json.loads(raw)
            task = Task.model_validate(body)
            again = task.model_dump(mode='json', exclude_none=True)
            if again != body:
                problem = f'not what a2a-sdk 0.3 would send: {body} != {again}'
        except (ValueError, ValidationError) as error:
            body, problem = None, f'{error} in {raw[:300]!r}'
        with lock:
            received.setdefault(self.path, []).append(({k.lower(): v for k, v in self.headers.items()}, body))
            if problem:
                problems.setdefault(self.path, []).append(problem)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def message(text: str, task: Task | None = None) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


async def last_task(stream) -> Task:
    items = [item async for item in stream]
    last = items[-1]
    assert isinstance(last, tuple), f'expected (Task, update), got {last!r}'
    return last[0]


async def completed_at(path: str, task_id: str, token: str | None) -> None:
    """Waits until `path` got the completed task; every body it got must have parsed."""
    deadline = time.monotonic() + 20
    while True:
        with lock:
            calls = list(received.get(path, []))
            bad = list(problems.get(path, []))
        assert not bad, bad[0]
        tasks = [Task.model_validate(body) for _, body in calls]
        assert all(t.id == task_id for t in tasks), [t.id for t in tasks]
        for headers, _ in calls:
            assert headers.get('x-a2a-notification-token') == token, headers
        if any(t.status.state == TaskState.completed for t in tasks):
            return
        assert time.monotonic() < deadline, f'no completed task at {path}: {[t.status.state for t in tasks]}'
        await asyncio.sleep(0.05)


async def check(name: str, body) -> None:
    try:
        await asyncio.wait_for(body(), timeout=30)
    except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the run
        detail = ''.join(traceback.format_exception_only(type(error), error)).strip()
        print(f'FAIL - {TAG} {name}: {detail}', flush=True)
        results.append(False)
    else:
        print(f'ok - {TAG} {name}', flush=True)
        results.append(True)


async def main(base_url: str) -> int:
    server = ThreadingHTTPServer(('127.0.0.1', 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f'http://127.0.0.1:{server.server_address[1]}'
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()

        def client(**extra):
            config = ClientConfig(
                streaming=False, httpx_client=http, supported_transports=[TransportProtocol.jsonrpc], **extra
            )
            return ClientFactory(config).create(card)

        async def set_callback():
            plain = client()
            task = await last_task(plain.send_message(message('input')))
            assert task.status.state == TaskState.input_required, task.status
            config = PushNotificationConfig(id='p1', url=f'{hook}/set', token='tok-set')
            await plain.set_task_callback(TaskPushNotificationConfig(task_id=task.id, push_notification_config=config))
            await last_task(plain.send_message(message('stream 2 100', task)))
            await completed_at('/set', task.id, 'tok-set')

        async def inline():
            config = PushNotificationConfig(url=f'{hook}/inline', token='tok-inline')
            task = await last_task(client(push_notification_configs=[config]).send_message(message('stream 2 100')))
            assert task.status.state == TaskState.completed, task.status
            await completed_at('/inline', task.id, 'tok-inline')

        await check('tasks/pushNotificationConfig/set: every body is an a2a-sdk 0.3 Task', set_callback)
        await check('inline message/send config: every body is an a2a-sdk 0.3 Task', inline)
    server.shutdown()

    passed = sum(results)
    print(f'{passed} passed, {len(results) - passed} failed')
    return 0 if passed == len(results) else 1


if __name__ == '__main__':
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1])))
