#!/usr/bin/env python3
"""Interop checks: drive an A2A v1.0 server with the official Python SDK client, one binding at a time.

Usage: sdk_interop.py BINDING BASE_URL
  BINDING   GRPC, JSONRPC or HTTP+JSON
  BASE_URL  where the server's Agent Card lives, e.g. http://127.0.0.1:50051

The client is built the way an application would build it: the SDK's card resolver
(``a2a.client.A2ACardResolver``) fetches ``BASE_URL/.well-known/agent-card.json``, and
``a2a.client.ClientFactory`` — restricted to BINDING through
``ClientConfig.supported_protocol_bindings`` — picks that binding's interface from the
card's ``supportedInterfaces`` and creates the transport for its URL
(``GrpcTransport``, ``JsonRpcTransport`` or ``RestTransport``). Every check then goes
through the SDK's high-level ``Client``; the same check bodies run for every binding,
only the wire-level detail of an error (gRPC status, HTTP status) is binding-specific.

Output: one line per check, ``ok - [BINDING] <name>`` or ``FAIL - [BINDING] <name>: <reason>``,
then ``N passed, M failed``. Exit status is non-zero if any check failed.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import httpx

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.client.transports.grpc import GrpcTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError


RPC_TIMEOUT = 15.0  # deadline / HTTP timeout for unary calls
STREAM_DEADLINE = 40.0  # deadline / HTTP timeout for streaming calls
STREAM_LIMIT = 30.0  # how long we wait for a stream to end on its own
CHECK_TIMEOUT = 60.0  # hard bound for one whole check
CONNECT_TIMEOUT = 10.0

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}

# binding -> the SDK transport class ClientFactory must pick for it
TRANSPORTS: dict[str, type] = {
    TransportProtocol.GRPC.value: GrpcTransport,
    TransportProtocol.JSONRPC.value: JsonRpcTransport,
    TransportProtocol.HTTP_JSON.value: RestTransport,
}


class CheckFailed(Exception):
    """A check's expectation did not hold."""


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


# --------------------------------------------------------------------------
# Where the client comes from: the server's Agent Card
# --------------------------------------------------------------------------


@dataclass
class Target:
    binding: str  # GRPC | JSONRPC | HTTP+JSON
    base_url: str  # where the card was fetched from
    card: AgentCard

    def client(self, *, streaming: bool) -> Client:
        """An SDK client for this binding, created from the card (own channel / HTTP client).

        streaming=True: ``send_message`` uses SendStreamingMessage (and ``subscribe``
        is allowed); streaming=False: ``send_message`` uses the unary SendMessage.
        """
        config = ClientConfig(
            streaming=streaming,
            supported_protocol_bindings=[self.binding],
            grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url),
        )
        client = ClientFactory(config).create(self.card)
        transport = getattr(client, '_transport', None)
        want = TRANSPORTS[self.binding]
        if not isinstance(transport, want):
            raise CheckFailed(
                f'ClientFactory restricted to {self.binding} picked '
                f'{type(transport).__name__}, expected {want.__name__}'
            )
        return client


async def fetch_card(base_url: str) -> AgentCard:
    async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT) as http:
        return await A2ACardResolver(http, base_url).get_agent_card()


# --------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------


def ctx(timeout: float = RPC_TIMEOUT) -> ClientCallContext:
    return ClientCallContext(timeout=timeout)


def user_message(text: str, *, context_id: str = '', task_id: str = '') -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )


def send_request(
    text: str,
    *,
    context_id: str = '',
    task_id: str = '',
    return_immediately: bool = False,
) -> SendMessageRequest:
    req = SendMessageRequest(
        message=user_message(text, context_id=context_id, task_id=task_id)
    )
    if return_immediately:
        req.configuration.return_immediately = True
    return req


async def send_unary(client: Client, req: SendMessageRequest) -> StreamResponse:
    """SendMessage through a non-streaming client: exactly one response."""
    out = [ev async for ev in client.send_message(req, context=ctx())]
    expect(len(out) == 1, f'SendMessage: SDK yielded {len(out)} items, expected 1')
    return out[0]


async def send_unary_task(client: Client, req: SendMessageRequest) -> Task:
    resp = await send_unary(client, req)
    expect(resp.HasField('task'), f'SendMessage: expected a Task, got {describe(resp)}')
    return resp.task


async def collect(
    stream: AsyncIterator[StreamResponse],
    events: list[StreamResponse],
    what: str,
    limit: float = STREAM_LIMIT,
) -> None:
    """Drain ``stream`` into ``events``; fail if it does not end within ``limit``."""

    async def drain() -> None:
        async for ev in stream:
            events.append(ev)

    try:
        await asyncio.wait_for(drain(), limit)
    except TimeoutError:
        raise CheckFailed(
            f'{what}: stream did not end within {limit:.0f}s; '
            f'got {len(events)} events: {describe_all(events)}'
        ) from None


# --------------------------------------------------------------------------
# Formatting helpers
# --------------------------------------------------------------------------


def st(state: int) -> str:
    try:
        return TaskState.Name(state).removeprefix('TASK_STATE_')
    except ValueError:
        return f'state#{state}'


def texts(parts) -> list[str]:
    return [p.text for p in parts if p.HasField('text')]


def describe(ev: StreamResponse) -> str:
    kind = ev.WhichOneof('payload')
    if kind == 'task':
        t = ev.task
        arts = [texts(a.parts) for a in t.artifacts]
        return f'Task({st(t.status.state)}, artifacts={arts})'
    if kind == 'message':
        return f'Message({texts(ev.message.parts)})'
    if kind == 'status_update':
        return f'Status({st(ev.status_update.status.state)})'
    if kind == 'artifact_update':
        u = ev.artifact_update
        return (
            f'Artifact({texts(u.artifact.parts)}, append={u.append}, '
            f'last_chunk={u.last_chunk})'
        )
    return 'Empty(StreamResponse with no payload)'


def describe_all(events: list[StreamResponse], limit: int = 16) -> str:
    shown = [describe(e) for e in events[:limit]]
    if len(events) > limit:
        shown.append(f'... (+{len(events) - limit})')
    return '[' + ', '.join(shown) + ']'


def describe_exc(e: BaseException) -> str:
    msg = f'{type(e).__name__}: {e}'
    data = getattr(e, 'data', None)
    if data:
        msg += f' data={data!r}'
    cause = e.__cause__
    if isinstance(cause, grpc.aio.AioRpcError):
        msg += f' [gRPC {cause.code().name}: {cause.details()!r}]'
    elif isinstance(cause, httpx.HTTPStatusError):
        body = ''
        try:
            body = cause.response.text[:300]
        except Exception:  # noqa: BLE001 - streamed body may be unread
            pass
        msg += f' [HTTP {cause.response.status_code} {cause.request.method} {cause.request.url}: {body!r}]'
    elif cause is not None:
        msg += f' [caused by {type(cause).__name__}: {cause}]'
    return msg


def chunks(lo: int, hi: int) -> list[str]:
    return [f'chunk {i}' for i in range(lo, hi)]


# --------------------------------------------------------------------------
# The wire-level side of an A2A error, per binding
# --------------------------------------------------------------------------

# A2A error class -> (gRPC status, HTTP status) per spec §5.4 (A2A-NOTES §6.1)
WIRE_CODES: dict[type[A2AError], tuple[grpc.StatusCode, int]] = {
    TaskNotFoundError: (grpc.StatusCode.NOT_FOUND, 404),
    TaskNotCancelableError: (grpc.StatusCode.FAILED_PRECONDITION, 400),
    UnsupportedOperationError: (grpc.StatusCode.FAILED_PRECONDITION, 400),
}


def expect_wire_code(target: Target, err: A2AError, cls: type[A2AError], what: str) -> None:
    """The SDK raised ``cls``; check how it travelled on this binding.

    gRPC: the status code (the SDK maps the ErrorInfo reason, not the code);
    HTTP+JSON: the HTTP status (the SDK maps the ErrorInfo reason, not the status);
    JSON-RPC: the SDK maps the error *code* to the class, so the class is the check.
    """
    want_grpc, want_http = WIRE_CODES[cls]
    cause = err.__cause__
    if target.binding == TransportProtocol.GRPC.value:
        got = cause.code() if isinstance(cause, grpc.aio.AioRpcError) else None
        expect(
            got == want_grpc,
            f'{what}: {cls.__name__} but gRPC status {got}, expected {want_grpc.name}',
        )
    elif target.binding == TransportProtocol.HTTP_JSON.value:
        # Errors raised from inside an SSE stream (``event: error``) have no HTTP status.
        if isinstance(cause, httpx.HTTPStatusError):
            got = cause.response.status_code
            expect(
                got == want_http,
                f'{what}: {cls.__name__} but HTTP status {got}, expected {want_http}',
            )


async def expect_error(
    target: Target, cls: type[A2AError], what: str, call: Callable[[], Awaitable[object]]
) -> None:
    try:
        got = await call()
    except cls as e:
        expect_wire_code(target, e, cls, what)
        return
    except (A2AError, ValueError) as e:
        raise CheckFailed(f'{what}: expected {cls.__name__}, got {describe_exc(e)}') from None
    shown = describe_all(got) if isinstance(got, list) else repr(got)[:200]
    raise CheckFailed(f'{what}: succeeded ({shown}), expected {cls.__name__}')


# --------------------------------------------------------------------------
# Stream verification shared by the streaming checks
# --------------------------------------------------------------------------


def verify_updates_after_task(
    events: list[StreamResponse],
    task: Task,
    *,
    expected_texts: list[str],
    first_append: bool,
    artifact_id: str | None,
    what: str,
) -> str:
    """Check the events that follow the initial Task of a stream.

    Only status/artifact updates for ``task``; artifact updates carry exactly
    ``expected_texts`` in order (one text part each, same artifact id, append
    false only on the first when ``first_append`` is False, last_chunk only on
    the last); the final event is a COMPLETED status update and nothing
    terminal comes before it. Returns the artifact id seen.
    """
    expect(events, f'{what}: no events after the initial Task')
    got_texts: list[str] = []
    for i, ev in enumerate(events):
        kind = ev.WhichOneof('payload')
        expect(
            kind in ('status_update', 'artifact_update'),
            f'{what}: event #{i + 1} after the Task is {describe(ev)}, '
            f'expected only status/artifact updates; all: {describe_all(events)}',
        )
        upd = getattr(ev, kind)
        expect(
            upd.task_id == task.id,
            f'{what}: {describe(ev)} has task_id {upd.task_id!r}, expected {task.id!r}',
        )
        expect(
            upd.context_id == task.context_id,
            f'{what}: {describe(ev)} has context_id {upd.context_id!r}, '
            f'expected {task.context_id!r}',
        )
        if kind == 'status_update' and i != len(events) - 1:
            expect(
                upd.status.state not in TERMINAL,
                f'{what}: terminal {describe(ev)} is followed by more events: '
                f'{describe_all(events)}',
            )
        if kind == 'artifact_update':
            parts = texts(upd.artifact.parts)
            expect(
                len(parts) == 1 and len(upd.artifact.parts) == 1,
                f'{what}: artifact update with parts {list(upd.artifact.parts)}, '
                'expected one text part',
            )
            n = len(got_texts)
            got_texts.append(parts[0])
            if artifact_id is None:
                artifact_id = upd.artifact.artifact_id
                expect(artifact_id, f'{what}: artifact update without artifact_id')
            expect(
                upd.artifact.artifact_id == artifact_id,
                f'{what}: chunk {parts[0]!r} has artifact_id '
                f'{upd.artifact.artifact_id!r}, expected {artifact_id!r}',
            )
            want_append = first_append or n > 0
            expect(
                upd.append == want_append,
                f'{what}: {describe(ev)}: expected append={want_append}',
            )
            want_last = n == len(expected_texts) - 1
            expect(
                upd.last_chunk == want_last,
                f'{what}: {describe(ev)}: expected last_chunk={want_last}',
            )
    expect(
        got_texts == expected_texts,
        f'{what}: streamed chunk texts {got_texts}, expected {expected_texts}',
    )
    last = events[-1]
    expect(
        last.HasField('status_update')
        and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
        f'{what}: last event is {describe(last)}, expected Status(COMPLETED); '
        f'all: {describe_all(events)}',
    )
    return artifact_id or ''


def verify_initial_task(events: list[StreamResponse], what: str) -> Task:
    expect(events, f'{what}: stream ended without any event')
    first = events[0]
    expect(
        first.HasField('task'),
        f'{what}: first event is {describe(first)}, expected a Task; '
        f'all: {describe_all(events)}',
    )
    task = first.task
    expect(task.id, f'{what}: initial Task has an empty id')
    expect(task.context_id, f'{what}: initial Task has an empty context_id')
    expect(
        task.status.state not in TERMINAL,
        f'{what}: initial Task is already {st(task.status.state)}',
    )
    return task


# --------------------------------------------------------------------------
# Checks (one body per check, run once per binding)
# --------------------------------------------------------------------------


async def check_card(target: Target) -> None:
    """The card declares this binding (v1.0) at the host:port it was fetched from."""
    ifaces = [
        i for i in target.card.supported_interfaces if i.protocol_binding == target.binding
    ]
    expect(
        ifaces,
        f'card declares no {target.binding} interface; it has '
        + str([(i.protocol_binding, i.url) for i in target.card.supported_interfaces]),
    )
    iface = ifaces[0]
    expect(
        iface.protocol_version == '1.0',
        f'{target.binding} interface protocolVersion {iface.protocol_version!r}, expected "1.0"',
    )
    base = urlsplit(target.base_url)
    if target.binding == TransportProtocol.GRPC.value:
        # gRPC interface URL is a bare host:port (A2A-NOTES §15.1 #14)
        expect(
            '://' not in iface.url and iface.url.rsplit(':', 1)[-1] == str(base.port),
            f'GRPC interface url {iface.url!r}, expected host:{base.port}',
        )
    else:
        u = urlsplit(iface.url)
        expect(
            u.scheme in ('http', 'https') and u.port == base.port,
            f'{target.binding} interface url {iface.url!r}, expected http://host:{base.port}[/]',
        )
    expect(target.card.capabilities.streaming, 'card capabilities.streaming is not true')
    # ClientFactory picks exactly this binding's transport.
    async with target.client(streaming=True):
        pass


async def stream_and_verify(target: Target, total: int, delay_ms: int = 100) -> Task:
    """SendStreamingMessage ``stream TOTAL DELAY_MS``: the Task, every chunk, COMPLETED."""
    async with target.client(streaming=True) as client:
        events: list[StreamResponse] = []
        await collect(
            client.send_message(
                send_request(f'stream {total} {delay_ms}'), context=ctx(STREAM_DEADLINE)
            ),
            events,
            'SendStreamingMessage',
        )
    task = verify_initial_task(events, 'SendStreamingMessage')
    verify_updates_after_task(
        events[1:],
        task,
        expected_texts=chunks(0, total),
        first_append=False,
        artifact_id=None,
        what='SendStreamingMessage',
    )
    return task


async def check_streaming_send(target: Target) -> None:
    await stream_and_verify(target, 5)


async def check_subscribe_mid_stream(target: Target) -> None:
    total = 10
    client_a = target.client(streaming=True)
    client_b = target.client(streaming=True)  # separate channel / HTTP client
    a_events: list[StreamResponse] = []
    first_chunk = asyncio.Event()

    async def run_a() -> None:
        async for ev in client_a.send_message(
            send_request(f'stream {total} 200'), context=ctx(STREAM_DEADLINE)
        ):
            a_events.append(ev)
            if ev.HasField('artifact_update'):
                first_chunk.set()

    a_task = asyncio.create_task(run_a())
    try:
        waiter = asyncio.create_task(first_chunk.wait())
        done, _ = await asyncio.wait(
            {waiter, a_task}, timeout=15, return_when=asyncio.FIRST_COMPLETED
        )
        if waiter not in done:
            waiter.cancel()
            if a_task in done and a_task.exception() is not None:
                raise CheckFailed(
                    'client A SendStreamingMessage failed before the first chunk: '
                    + describe_exc(a_task.exception())
                )
            raise CheckFailed(
                'client A saw no artifact chunk within 15s; got ' + describe_all(a_events)
            )
        task = verify_initial_task(a_events, 'client A SendStreamingMessage')

        b_events: list[StreamResponse] = []
        await collect(
            client_b.subscribe(SubscribeToTaskRequest(id=task.id), context=ctx(STREAM_DEADLINE)),
            b_events,
            'client B SubscribeToTask',
        )
        expect(b_events, 'SubscribeToTask: stream ended without any event')
        first = b_events[0]
        expect(
            first.HasField('task'),
            f'SubscribeToTask: first event is {describe(first)}, expected a Task '
            f'snapshot; all: {describe_all(b_events)}',
        )
        snap = first.task
        expect(snap.id == task.id, f'SubscribeToTask: snapshot id {snap.id!r}, expected {task.id!r}')
        expect(
            snap.status.state not in TERMINAL,
            f'SubscribeToTask: snapshot already {st(snap.status.state)} '
            '(subscribed right after the first chunk of a 2 s stream)',
        )
        expect(
            len(snap.artifacts) == 1,
            f'SubscribeToTask: snapshot has {len(snap.artifacts)} artifacts, '
            'expected 1 holding the chunks so far (first chunk was already seen)',
        )
        snap_texts = texts(snap.artifacts[0].parts)
        k = len(snap_texts)
        expect(
            k >= 1 and snap_texts == chunks(0, k),
            f'SubscribeToTask: snapshot artifact texts {snap_texts}, expected '
            'chunk 0..chunk k-1 with k >= 1',
        )
        verify_updates_after_task(
            b_events[1:],
            snap,
            expected_texts=chunks(k, total),
            first_append=True,
            artifact_id=snap.artifacts[0].artifact_id,
            what=f'SubscribeToTask (snapshot held {k} chunks)',
        )
        streamed = [
            texts(e.artifact_update.artifact.parts)[0]
            for e in b_events[1:]
            if e.HasField('artifact_update')
        ]
        expect(
            snap_texts + streamed == chunks(0, total),
            f'snapshot {snap_texts} + streamed {streamed} != chunk 0..{total - 1}',
        )

        # Client A's own stream must be unaffected and complete too.
        try:
            await asyncio.wait_for(asyncio.shield(a_task), STREAM_LIMIT)
        except TimeoutError:
            raise CheckFailed('client A stream did not end; got ' + describe_all(a_events)) from None
        verify_updates_after_task(
            a_events[1:],
            task,
            expected_texts=chunks(0, total),
            first_append=False,
            artifact_id=None,
            what='client A SendStreamingMessage',
        )
    finally:
        if not a_task.done():
            a_task.cancel()
            try:
                await a_task
            except BaseException:  # noqa: BLE001 - cleanup only
                pass
        await client_a.close()
        await client_b.close()


async def check_get_task(target: Target) -> None:
    async with target.client(streaming=False) as client:
        task = await send_unary_task(client, send_request('hello'))
        expect(
            task.status.state == TaskState.TASK_STATE_COMPLETED,
            f'SendMessage("hello"): state {st(task.status.state)}, expected COMPLETED',
        )
        arts = [texts(a.parts) for a in task.artifacts]
        expect(arts == [['hello']], f'SendMessage("hello"): artifacts {arts}, expected [["hello"]]')

        got = await client.get_task(GetTaskRequest(id=task.id), context=ctx())
        expect(got.id == task.id, f'GetTask: id {got.id!r}, expected {task.id!r}')
        expect(
            got.status.state == TaskState.TASK_STATE_COMPLETED,
            f'GetTask: state {st(got.status.state)}, expected COMPLETED',
        )
        arts = [texts(a.parts) for a in got.artifacts]
        expect(arts == [['hello']], f'GetTask: artifacts {arts}, expected [["hello"]]')

        h0 = await client.get_task(GetTaskRequest(id=task.id, history_length=0), context=ctx())
        expect(
            len(h0.history) == 0,
            f'GetTask(history_length=0): {len(h0.history)} history messages, expected 0',
        )
        h1 = await client.get_task(GetTaskRequest(id=task.id, history_length=1), context=ctx())
        expect(
            len(h1.history) == 1,
            f'GetTask(history_length=1): {len(h1.history)} history messages, expected 1',
        )


async def check_list_tasks(target: Target) -> None:
    context_id = str(uuid.uuid4())
    async with target.client(streaming=False) as client:
        t1 = await send_unary_task(client, send_request('list first', context_id=context_id))
        # keep the two status timestamps apart so newest-first is unambiguous
        await asyncio.sleep(0.05)
        t2 = await send_unary_task(client, send_request('list second', context_id=context_id))
        for t in (t1, t2):
            expect(
                t.context_id == context_id,
                f'SendMessage: task context_id {t.context_id!r}, expected the '
                f'client-chosen {context_id!r}',
            )
        want = [t2.id, t1.id]

        full = await client.list_tasks(ListTasksRequest(context_id=context_id), context=ctx())
        got = [t.id for t in full.tasks]
        expect(got == want, f'ListTasks(context_id): ids {got}, expected {want} (newest first)')
        expect(
            full.total_size == 2,
            f'ListTasks(context_id): total_size {full.total_size}, expected 2',
        )
        expect(
            full.next_page_token == '',
            f'ListTasks(context_id): next_page_token {full.next_page_token!r}, expected empty',
        )

        p1 = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=1), context=ctx()
        )
        got = [t.id for t in p1.tasks]
        expect(got == [t2.id], f'ListTasks page 1: ids {got}, expected {[t2.id]}')
        expect(p1.next_page_token != '', 'ListTasks page 1: empty next_page_token')
        expect(p1.total_size == 2, f'ListTasks page 1: total_size {p1.total_size}, expected 2')
        expect(p1.page_size == 1, f'ListTasks page 1: page_size {p1.page_size}, expected 1')

        p2 = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=1, page_token=p1.next_page_token),
            context=ctx(),
        )
        got = [t.id for t in p2.tasks]
        expect(got == [t1.id], f'ListTasks page 2: ids {got}, expected {[t1.id]}')
        expect(
            p2.next_page_token == '',
            f'ListTasks page 2: next_page_token {p2.next_page_token!r}, expected empty',
        )
        expect(p2.total_size == 2, f'ListTasks page 2: total_size {p2.total_size}, expected 2')


async def check_cancel(target: Target) -> None:
    async with target.client(streaming=False) as client:
        started = time.monotonic()
        task = await send_unary_task(
            client, send_request('stream 100 200', return_immediately=True)
        )
        elapsed = time.monotonic() - started
        expect(
            elapsed < 5,
            f'SendMessage(return_immediately=true) took {elapsed:.1f}s '
            '(a 20 s task): did not return immediately',
        )
        expect(
            task.status.state not in TERMINAL,
            f'SendMessage(return_immediately=true): state {st(task.status.state)}, '
            'expected a non-terminal state',
        )

        canceled = await client.cancel_task(CancelTaskRequest(id=task.id), context=ctx())
        expect(
            canceled.id == task.id,
            f'CancelTask: returned task id {canceled.id!r}, expected {task.id!r}',
        )
        expect(
            canceled.status.state == TaskState.TASK_STATE_CANCELED,
            f'CancelTask: returned state {st(canceled.status.state)}, expected CANCELED',
        )

        got = await client.get_task(GetTaskRequest(id=task.id), context=ctx())
        expect(
            got.status.state == TaskState.TASK_STATE_CANCELED,
            f'GetTask after cancel: state {st(got.status.state)}, expected CANCELED',
        )

        await expect_error(
            target,
            TaskNotCancelableError,
            'second CancelTask',
            lambda: client.cancel_task(CancelTaskRequest(id=task.id), context=ctx()),
        )


async def check_unknown_task(target: Target) -> None:
    async with target.client(streaming=True) as client:
        await expect_error(
            target,
            TaskNotFoundError,
            'GetTask("does-not-exist")',
            lambda: client.get_task(GetTaskRequest(id='does-not-exist'), context=ctx()),
        )
        await expect_error(
            target,
            TaskNotFoundError,
            'CancelTask("does-not-exist")',
            lambda: client.cancel_task(CancelTaskRequest(id='does-not-exist'), context=ctx()),
        )

        async def subscribe() -> list[StreamResponse]:
            events: list[StreamResponse] = []
            await collect(
                client.subscribe(
                    SubscribeToTaskRequest(id='does-not-exist'), context=ctx(STREAM_DEADLINE)
                ),
                events,
                'SubscribeToTask',
            )
            return events

        await expect_error(target, TaskNotFoundError, 'SubscribeToTask("does-not-exist")', subscribe)


async def check_input_required(target: Target) -> None:
    async with target.client(streaming=False) as client:
        task = await send_unary_task(client, send_request('input'))
        expect(
            task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
            f'SendMessage("input"): state {st(task.status.state)}, expected INPUT_REQUIRED',
        )
        question = texts(task.status.message.parts)
        expect(
            task.status.HasField('message') and any(question),
            'SendMessage("input"): INPUT_REQUIRED status carries no question text',
        )

        done = await send_unary_task(
            client, send_request('blue', task_id=task.id, context_id=task.context_id)
        )
        expect(done.id == task.id, f'follow-up SendMessage: task id {done.id!r}, expected {task.id!r}')
        expect(
            done.status.state == TaskState.TASK_STATE_COMPLETED,
            f'follow-up SendMessage("blue"): state {st(done.status.state)}, expected COMPLETED',
        )
        arts = [texts(a.parts) for a in done.artifacts]
        expect(
            any('blue' in a for a in arts),
            f'follow-up SendMessage("blue"): artifacts {arts}, expected one echoing "blue"',
        )


async def check_direct_message(target: Target) -> None:
    async with target.client(streaming=False) as client:
        resp = await send_unary(client, send_request('message hi there'))
    expect(
        resp.HasField('message'),
        f'SendMessage("message hi there"): got {describe(resp)}, expected a Message',
    )
    msg = resp.message
    expect(
        texts(msg.parts) == ['hi there'],
        f'direct Message texts {texts(msg.parts)}, expected ["hi there"]',
    )
    expect(
        msg.role == Role.ROLE_AGENT,
        f'direct Message role {Role.Name(msg.role)}, expected ROLE_AGENT',
    )
    expect(msg.message_id, 'direct Message has an empty message_id')


async def check_direct_message_streaming(target: Target) -> None:
    async with target.client(streaming=True) as client:
        events: list[StreamResponse] = []
        await collect(
            client.send_message(send_request('message hi there'), context=ctx(STREAM_DEADLINE)),
            events,
            'SendStreamingMessage',
        )
    expect(
        len(events) == 1 and events[0].HasField('message'),
        f'SendStreamingMessage("message hi there"): got {describe_all(events)}, '
        'expected exactly one Message',
    )
    got = texts(events[0].message.parts)
    expect(got == ['hi there'], f'direct Message texts {got}, expected ["hi there"]')


async def check_subscribe_terminal(target: Target) -> None:
    async with target.client(streaming=False) as unary:
        task = await send_unary_task(unary, send_request('hello again'))
    expect(
        task.status.state == TaskState.TASK_STATE_COMPLETED,
        f'SendMessage: state {st(task.status.state)}, expected COMPLETED',
    )
    async with target.client(streaming=True) as client:

        async def subscribe() -> list[StreamResponse]:
            events: list[StreamResponse] = []
            await collect(
                client.subscribe(SubscribeToTaskRequest(id=task.id), context=ctx(STREAM_DEADLINE)),
                events,
                'SubscribeToTask',
            )
            return events

        await expect_error(
            target, UnsupportedOperationError, 'SubscribeToTask on a COMPLETED task', subscribe
        )


CHECKS: list[tuple[str, Callable[[Target], Awaitable[None]]]] = [
    ('agent card declares this binding; ClientFactory picks it', check_card),
    ('streaming send: stream 5 100', check_streaming_send),
    ('subscribe mid-stream from a second client', check_subscribe_mid_stream),
    ('get task with history_length', check_get_task),
    ('list tasks by context_id with pagination', check_list_tasks),
    ('cancel task, then cancel again -> TaskNotCancelableError', check_cancel),
    ('unknown task -> TaskNotFoundError (get, cancel, subscribe)', check_unknown_task),
    ('input-required multi-turn', check_input_required),
    ('direct message reply (SendMessage)', check_direct_message),
    ('direct message reply (SendStreamingMessage)', check_direct_message_streaming),
    ('subscribe to a terminal task -> UnsupportedOperationError', check_subscribe_terminal),
]


async def run_check(
    name: str, fn: Callable[[Target], Awaitable[None]], target: Target
) -> bool:
    label = f'[{target.binding}] {name}'
    try:
        await asyncio.wait_for(fn(target), CHECK_TIMEOUT)
    except CheckFailed as e:
        print(f'FAIL - {label}: {e}', flush=True)
        return False
    except TimeoutError:
        print(f'FAIL - {label}: check did not finish within {CHECK_TIMEOUT:.0f}s', flush=True)
        return False
    except Exception as e:  # noqa: BLE001 - report anything the SDK raised
        print(f'FAIL - {label}: {describe_exc(e)}', flush=True)
        return False
    print(f'ok - {label}', flush=True)
    return True


async def main(binding: str, base_url: str) -> int:
    try:
        card = await fetch_card(base_url)
    except Exception as e:  # noqa: BLE001 - report anything
        print(
            f'FAIL - [{binding}] fetch the Agent Card from {base_url}: {describe_exc(e)}',
            flush=True,
        )
        print('0 passed, 1 failed', flush=True)
        return 1
    target = Target(binding=binding, base_url=base_url, card=card)
    passed = failed = 0
    for name, fn in CHECKS:
        if await run_check(name, fn, target):
            passed += 1
        else:
            failed += 1
    print(f'{passed} passed, {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[1] not in TRANSPORTS:
        print(
            f'usage: {sys.argv[0]} {{{"|".join(TRANSPORTS)}}} BASE_URL', file=sys.stderr
        )
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2].rstrip('/'))))
