#!/usr/bin/env python3
"""The fleet end to end: the official Python SDK client against three replicas behind nginx.

Usage: fleet_interop.py BASE_URL GRPC_ADDR [REPLICA_URL ...]
  BASE_URL     nginx's HTTP side, where the Agent Card is fetched (http://127.0.0.1:P)
  GRPC_ADDR    nginx's gRPC side (host:port), which the card must name as the gRPC interface
  REPLICA_URL  each replica's own URL, read only for /metrics: proof that the calls really
               spread over the replicas and crossed between them

Every check runs once per binding (GRPC, JSONRPC, HTTP+JSON), each through a client built
from the card the way sdk_interop.py builds it (``Target.client``): every call goes through
nginx, which balances per call, so a task's calls land on different replicas.

Output: ``ok - [BINDING] name`` or ``FAIL - [BINDING] name: reason`` per check, then
``N passed, M failed`` as the last line; exit status non-zero on any failure.
"""

from __future__ import annotations

import asyncio
import re
import sys
import uuid

from urllib.parse import urlsplit

import httpx

from a2a.client.client import Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskState,
)
from a2a.utils.constants import TransportProtocol

from sdk_interop import (
    STREAM_DEADLINE,
    TERMINAL,
    TRANSPORTS,
    CheckFailed,
    Target,
    chunks,
    collect,
    ctx,
    describe_all,
    expect,
    expect_error,
    fetch_card,
    run_check,
    send_request,
    send_unary_task,
    stream_and_verify,
    st,
    texts,
    verify_initial_task,
    verify_updates_after_task,
)

SUBSCRIBERS = 4  # more than replicas: round-robin puts them on every replica


class Fleet:
    """What the checks know about the deployment besides the card."""

    def __init__(self, grpc_addr: str, replicas: list[str]) -> None:
        self.grpc_addr = grpc_addr
        self.replicas = replicas

    async def counter(self, name: str, labels: dict[str, str] | None = None) -> list[float]:
        """Per replica, the sum of ``name`` samples whose labels include ``labels``."""
        out = []
        async with httpx.AsyncClient(timeout=10) as http:
            for url in self.replicas:
                text = (await http.get(f'{url}/metrics')).text
                total = 0.0
                for line in text.splitlines():
                    m = re.match(rf'^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$', line)
                    if not m:
                        continue
                    have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ''))
                    if all(have.get(k) == v for k, v in (labels or {}).items()):
                        total += float(m.group(2))
                out.append(total)
        return out


FLEET: Fleet


def snapshot_chunks(snap: Task, what: str) -> list[str]:
    expect(len(snap.artifacts) <= 1, f'{what}: snapshot has {len(snap.artifacts)} artifacts')
    got = texts(snap.artifacts[0].parts) if snap.artifacts else []
    expect(got == chunks(0, len(got)), f'{what}: snapshot artifact texts {got}')
    return got


async def get_everywhere(target: Target, task_id: str, n: int = 3) -> list[Task]:
    """GetTask ``n`` times, each on its own client: nginx sends them to different replicas."""
    got = []
    for _ in range(n):
        async with target.client(streaming=False) as client:
            got.append(await client.get_task(GetTaskRequest(id=task_id), context=ctx()))
    return got


async def check_card(target: Target) -> None:
    """The card names nginx, not a replica: gRPC at GRPC_ADDR, HTTP at BASE_URL's port."""
    ifaces = [i for i in target.card.supported_interfaces if i.protocol_binding == target.binding]
    expect(ifaces, f'card declares no {target.binding} interface')
    url = ifaces[0].url
    if target.binding == TransportProtocol.GRPC.value:
        expect(url == FLEET.grpc_addr, f'GRPC interface url {url!r}, expected {FLEET.grpc_addr!r}')
    else:
        port = urlsplit(target.base_url).port
        expect(urlsplit(url).port == port, f'{target.binding} interface url {url!r}, expected port {port}')


async def check_stream(target: Target) -> None:
    task = await stream_and_verify(target, 10)
    for got in await get_everywhere(target, task.id):
        expect(got.status.state == TaskState.TASK_STATE_COMPLETED, f'GetTask: {st(got.status.state)}')
        arts = [texts(a.parts) for a in got.artifacts]
        expect(arts == [chunks(0, 10)], f'GetTask: artifacts {arts}')


async def subscribe_and_verify(target: Target, task_id: str, total: int, n: int) -> None:
    events: list[StreamResponse] = []
    async with target.client(streaming=True) as client:
        await collect(
            client.subscribe(SubscribeToTaskRequest(id=task_id), context=ctx(STREAM_DEADLINE)),
            events,
            f'subscriber {n}',
        )
    what = f'subscriber {n}'
    expect(events and events[0].HasField('task'), f'{what}: first event is not a Task: {describe_all(events)}')
    snap = events[0].task
    expect(snap.id == task_id, f'{what}: snapshot of {snap.id!r}')
    expect(snap.status.state not in TERMINAL, f'{what}: snapshot already {st(snap.status.state)}')
    so_far = snapshot_chunks(snap, what)
    verify_updates_after_task(
        events[1:], snap, expected_texts=chunks(len(so_far), total), first_append=bool(so_far),
        artifact_id=snap.artifacts[0].artifact_id if snap.artifacts else None,
        what=f'{what} (snapshot held {len(so_far)} chunks)',
    )


async def check_subscribe_many(target: Target) -> None:
    """Several subscribers join a running stream; each gets snapshot + exactly the rest."""
    total = 10
    before = await FLEET.counter('a2a_requests_total', {'method': 'SubscribeToTask'}) if FLEET.replicas else []
    async with target.client(streaming=True) as client:
        stream = client.send_message(send_request(f'stream {total} 200'), context=ctx(STREAM_DEADLINE))
        events: list[StreamResponse] = []
        async for ev in stream:
            events.append(ev)
            if ev.HasField('artifact_update'):
                break
        task = verify_initial_task(events, 'SendStreamingMessage')
        subscribers = [
            asyncio.create_task(subscribe_and_verify(target, task.id, total, n)) for n in range(SUBSCRIBERS)
        ]
        rest: list[StreamResponse] = []
        await collect(stream, rest, 'SendStreamingMessage (the rest)')
        await asyncio.gather(*subscribers)
    verify_updates_after_task(
        events[1:] + rest, task, expected_texts=chunks(0, total), first_append=False, artifact_id=None,
        what='SendStreamingMessage',
    )
    if FLEET.replicas:
        after = await FLEET.counter('a2a_requests_total', {'method': 'SubscribeToTask'})
        served = [a - b for a, b in zip(after, before)]
        expect(sum(served) == SUBSCRIBERS, f'replicas served {served} SubscribeToTask calls')
        expect(sum(1 for s in served if s) >= 2, f'the subscriptions did not spread: {served}')


async def check_list(target: Target) -> None:
    context_id = str(uuid.uuid4())
    async with target.client(streaming=False) as client:
        t1 = await send_unary_task(client, send_request('list first', context_id=context_id))
        await asyncio.sleep(0.05)  # status timestamps have millisecond precision
        t2 = await send_unary_task(client, send_request('list second', context_id=context_id))
    want = [t2.id, t1.id]
    for n in range(3):
        async with target.client(streaming=False) as client:
            full = await client.list_tasks(ListTasksRequest(context_id=context_id), context=ctx())
        got = [t.id for t in full.tasks]
        expect(got == want and full.total_size == 2, f'ListTasks #{n}: {got} (total {full.total_size}), expected {want}')
    # Page 2 with the token of page 1, each page on its own client (so on another replica).
    async with target.client(streaming=False) as client:
        p1 = await client.list_tasks(ListTasksRequest(context_id=context_id, page_size=1), context=ctx())
    async with target.client(streaming=False) as client:
        p2 = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=1, page_token=p1.next_page_token), context=ctx()
        )
    pages = [[t.id for t in p1.tasks], [t.id for t in p2.tasks]]
    expect(pages == [[t2.id], [t1.id]], f'ListTasks pages {pages}, expected {[[t2.id], [t1.id]]}')
    expect(p1.next_page_token and not p2.next_page_token, 'ListTasks page tokens')


async def cancel_and_verify(target: Target, text: str, return_immediately: bool) -> None:
    async with target.client(streaming=False) as client:
        task = await send_unary_task(client, send_request(text, return_immediately=return_immediately))
    expect(task.status.state not in TERMINAL, f'{text!r}: already {st(task.status.state)}')
    async with target.client(streaming=False) as client:
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id), context=ctx())
    expect(canceled.id == task.id, f'CancelTask({text!r}) answered for {canceled.id!r}')
    expect(
        canceled.status.state == TaskState.TASK_STATE_CANCELED,
        f'CancelTask({text!r}): {st(canceled.status.state)}, expected CANCELED',
    )
    for got in await get_everywhere(target, task.id):
        expect(got.status.state == TaskState.TASK_STATE_CANCELED, f'GetTask after cancel: {st(got.status.state)}')
    async with target.client(streaming=False) as client:
        await expect_error(
            target,
            TaskNotCancelableError,
            f'second CancelTask({text!r})',
            lambda: client.cancel_task(CancelTaskRequest(id=task.id), context=ctx()),
        )


async def check_cancel(target: Target) -> None:
    await cancel_and_verify(target, 'stream 50 200', return_immediately=True)
    await cancel_and_verify(target, 'input', return_immediately=False)


async def check_follow_up(target: Target) -> None:
    """A follow-up answering INPUT_REQUIRED, unary and streaming, each from a new client."""
    async with target.client(streaming=False) as client:
        task = await send_unary_task(client, send_request('input'))
    expect(task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f'"input": {st(task.status.state)}')
    async with target.client(streaming=False) as client:
        done = await send_unary_task(client, send_request('blue', task_id=task.id, context_id=task.context_id))
    expect(done.id == task.id, f'follow-up answered for {done.id!r}')
    expect(done.status.state == TaskState.TASK_STATE_COMPLETED, f'follow-up: {st(done.status.state)}')
    arts = [texts(a.parts) for a in done.artifacts]
    expect(arts == [['blue']], f'follow-up artifacts {arts}, expected [["blue"]]')

    async with target.client(streaming=False) as client:
        task = await send_unary_task(client, send_request('input'))
    events: list[StreamResponse] = []
    async with target.client(streaming=True) as client:
        await collect(
            client.send_message(
                send_request('stream 5 50', task_id=task.id, context_id=task.context_id),
                context=ctx(STREAM_DEADLINE),
            ),
            events,
            'streaming follow-up',
        )
    expect(events and events[0].HasField('task'), f'streaming follow-up: {describe_all(events)}')
    verify_updates_after_task(
        events[1:], events[0].task, expected_texts=chunks(0, 5), first_append=False, artifact_id=None,
        what='streaming follow-up',
    )


async def check_crossed(target: Target) -> None:
    """Commands really crossed between replicas (the checks above forwarded some)."""
    if not FLEET.replicas:
        return
    forwarded = await FLEET.counter('a2a_fleet_forwarded_total')
    expect(sum(forwarded) > 0, f'no replica forwarded a command: {forwarded}')
    served = await FLEET.counter('a2a_requests_total', {'method': 'GetTask'})
    expect(sum(1 for s in served if s) == len(served), f'GetTask did not reach every replica: {served}')


CHECKS = [
    ('the card names nginx', check_card),
    ('streaming send: stream 10 100, then GetTask on several replicas', check_stream),
    (f'{SUBSCRIBERS} subscribers join a running stream through the balancer', check_subscribe_many),
    ('list tasks from several replicas, a page token across replicas', check_list),
    ('cancel a running and an input-required task from another replica', check_cancel),
    ('follow-up answering input-required (unary and streaming)', check_follow_up),
    ('commands crossed between replicas', check_crossed),
]


async def main(base_url: str, grpc_addr: str, replicas: list[str]) -> int:
    global FLEET
    FLEET = Fleet(grpc_addr, replicas)
    passed = failed = 0
    try:
        card = await fetch_card(base_url)
    except Exception as e:  # noqa: BLE001 - report anything
        print(f'FAIL - fetch the Agent Card from {base_url}: {type(e).__name__}: {e}', flush=True)
        print('0 passed, 1 failed', flush=True)
        return 1
    for binding in TRANSPORTS:
        target = Target(binding=binding, base_url=base_url, card=card)
        for name, fn in CHECKS:
            if await run_check(name, fn, target):
                passed += 1
            else:
                failed += 1
    print(f'{passed} passed, {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) < 3:
        print(f'usage: {sys.argv[0]} BASE_URL GRPC_ADDR [REPLICA_URL ...]', file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip('/'), sys.argv[2], [u.rstrip('/') for u in sys.argv[3:]])))
