"""Checks an upstream test agent with the official client of the SDK it is built on.

    target/interop-venv/bin/python     check_agents.py --version v10 [--agent agent_v10.py]
    target/interop-venv-v03/bin/python check_agents.py --version v03 [--agent agent_v03.py]

Starts the agent on a free port, waits for `READY <port>`, then drives every behaviour
(echo, stream, ask, slow + cancel, reply, fail, resubscribe) through the SDK client:
a2a-sdk 1.x for v10 (over JSON-RPC and HTTP+JSON), a2a-sdk 0.3 for v03 (JSON-RPC).
Prints PASS/FAIL per case and exits non-zero on any failure.

Events are normalised into `Ev` so the cases are written once for both SDKs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
import traceback
import uuid

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 30.0


@dataclass
class Ev:
    """One protocol event, SDK-neutral."""

    kind: str  # task | status | artifact | message
    task_id: str = ''
    context_id: str = ''
    state: str = ''  # submitted, working, input-required, completed, canceled, failed
    text: str = ''  # status message / artifact / message text
    msg_task_id: str = ''  # ids carried by the status message, if any
    msg_context_id: str = ''
    artifact_id: str = ''
    artifact_name: str = ''
    append: bool = False
    last_chunk: bool = False
    artifacts: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, text)

    def __str__(self) -> str:
        if self.kind in ('task', 'status'):
            extra = f' artifacts={self.artifacts}' if self.kind == 'task' else ''
            return f'{self.kind}({self.state}, {self.text!r}){extra}'
        if self.kind == 'artifact':
            return (
                f'artifact({self.artifact_id}, {self.text!r}, append={self.append}, '
                f'last={self.last_chunk})'
            )
        return f'message({self.text!r})'


class CheckFailed(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


def show(events: list[Ev]) -> str:
    return '[' + ', '.join(str(e) for e in events) + ']'


# --------------------------------------------------------------------------
# SDK adapters: same methods, each returning Ev
# --------------------------------------------------------------------------


class V10:
    """a2a-sdk 1.x client, restricted to one protocol binding of the card."""

    def __init__(self, base: str, binding: str) -> None:
        self.base, self.binding = base, binding

    async def open(self) -> None:
        import httpx

        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        self._http = httpx.AsyncClient(timeout=TIMEOUT)
        self.card = await A2ACardResolver(self._http, self.base).get_agent_card()

        def make(streaming: bool, polling: bool = False):
            config = ClientConfig(
                streaming=streaming,
                polling=polling,
                httpx_client=self._http,
                supported_protocol_bindings=[self.binding],
            )
            return ClientFactory(config).create(self.card)

        self._stream = make(True)
        self._unary = make(False)
        self._poll = make(False, polling=True)

    async def close(self) -> None:
        for c in (self._stream, self._unary, self._poll):
            await c.close()
        await self._http.aclose()

    def card_summary(self) -> tuple[str, bool, list[str]]:
        urls = [f'{i.protocol_binding} {i.url}' for i in self.card.supported_interfaces]
        return self.card.name, self.card.capabilities.streaming, urls

    @staticmethod
    def _state(state) -> str:
        from a2a.types import TaskState

        return TaskState.Name(state).removeprefix('TASK_STATE_').lower().replace('_', '-')

    @staticmethod
    def _text(parts) -> str:
        return '\n'.join(p.text for p in parts if p.HasField('text'))

    def _task(self, t) -> Ev:
        return Ev(
            'task',
            task_id=t.id,
            context_id=t.context_id,
            state=self._state(t.status.state),
            text=self._text(t.status.message.parts),
            artifacts=[(a.artifact_id, a.name, self._text(a.parts)) for a in t.artifacts],
        )

    def _ev(self, r) -> Ev:
        which = r.WhichOneof('payload')
        if which == 'task':
            return self._task(r.task)
        if which == 'message':
            m = r.message
            return Ev('message', task_id=m.task_id, context_id=m.context_id, text=self._text(m.parts))
        if which == 'status_update':
            s = r.status_update
            return Ev(
                'status',
                task_id=s.task_id,
                context_id=s.context_id,
                state=self._state(s.status.state),
                text=self._text(s.status.message.parts),
                msg_task_id=s.status.message.task_id,
                msg_context_id=s.status.message.context_id,
            )
        a = r.artifact_update
        return Ev(
            'artifact',
            task_id=a.task_id,
            context_id=a.context_id,
            artifact_id=a.artifact.artifact_id,
            artifact_name=a.artifact.name,
            text=self._text(a.artifact.parts),
            append=a.append,
            last_chunk=a.last_chunk,
        )

    def _request(self, text: str, task_id: str, context_id: str):
        from a2a.types import Message, Part, Role, SendMessageRequest

        return SendMessageRequest(
            message=Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                parts=[Part(text=text)],
                task_id=task_id,
                context_id=context_id,
            )
        )

    async def stream(self, text: str, task_id: str = '', context_id: str = '') -> AsyncIterator[Ev]:
        async for r in self._stream.send_message(self._request(text, task_id, context_id)):
            yield self._ev(r)

    async def send(self, text: str, task_id: str = '', context_id: str = '', poll: bool = False) -> Ev:
        client = self._poll if poll else self._unary
        out = [r async for r in client.send_message(self._request(text, task_id, context_id))]
        expect(len(out) == 1, f'non-streaming send yielded {len(out)} items')
        return self._ev(out[0])

    async def cancel(self, task_id: str) -> Ev:
        from a2a.types import CancelTaskRequest

        return self._task(await self._unary.cancel_task(CancelTaskRequest(id=task_id)))

    async def get(self, task_id: str) -> Ev:
        from a2a.types import GetTaskRequest

        return self._task(await self._unary.get_task(GetTaskRequest(id=task_id)))

    async def subscribe(self, task_id: str) -> AsyncIterator[Ev]:
        from a2a.types import SubscribeToTaskRequest

        async for r in self._stream.subscribe(SubscribeToTaskRequest(id=task_id)):
            yield self._ev(r)


class V03:
    """a2a-sdk 0.3 client over JSON-RPC (the only interface the v0.3 card declares)."""

    binding = 'JSONRPC'

    def __init__(self, base: str) -> None:
        self.base = base

    async def open(self) -> None:
        import httpx

        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        self._http = httpx.AsyncClient(timeout=TIMEOUT)
        self.card = await A2ACardResolver(self._http, self.base).get_agent_card()

        def make(streaming: bool, polling: bool = False):
            config = ClientConfig(streaming=streaming, polling=polling, httpx_client=self._http)
            return ClientFactory(config).create(self.card)

        self._stream = make(True)
        self._unary = make(False)
        self._poll = make(False, polling=True)

    async def close(self) -> None:
        for c in (self._stream, self._unary, self._poll):
            await c.close()
        await self._http.aclose()

    def card_summary(self) -> tuple[str, bool, list[str]]:
        return self.card.name, bool(self.card.capabilities.streaming), [
            f'{self.card.preferred_transport} {self.card.url}'
        ]

    @staticmethod
    def _text(parts) -> str:
        from a2a.types import TextPart

        return '\n'.join(p.root.text for p in parts or [] if isinstance(p.root, TextPart))

    def _task(self, t) -> Ev:
        msg = t.status.message
        return Ev(
            'task',
            task_id=t.id,
            context_id=t.context_id,
            state=t.status.state.value,
            text=self._text(msg.parts) if msg else '',
            artifacts=[(a.artifact_id, a.name or '', self._text(a.parts)) for a in t.artifacts or []],
        )

    def _ev(self, item) -> Ev:
        from a2a.types import Message, TaskArtifactUpdateEvent

        if isinstance(item, Message):
            return Ev('message', task_id=item.task_id or '', context_id=item.context_id or '', text=self._text(item.parts))
        # The 0.3 client yields (task so far, update); update is None for a Task event.
        task, update = item
        if update is None:
            return self._task(task)
        if isinstance(update, TaskArtifactUpdateEvent):
            return Ev(
                'artifact',
                task_id=update.task_id,
                context_id=update.context_id,
                artifact_id=update.artifact.artifact_id,
                artifact_name=update.artifact.name or '',
                text=self._text(update.artifact.parts),
                append=bool(update.append),
                last_chunk=bool(update.last_chunk),
            )
        msg = update.status.message
        return Ev(
            'status',
            task_id=update.task_id,
            context_id=update.context_id,
            state=update.status.state.value,
            text=self._text(msg.parts) if msg else '',
            msg_task_id=(msg.task_id or '') if msg else '',
            msg_context_id=(msg.context_id or '') if msg else '',
        )

    @staticmethod
    def _message(text: str, task_id: str, context_id: str):
        from a2a.types import Message, Part, Role, TextPart

        return Message(
            message_id=str(uuid.uuid4()),
            role=Role.user,
            parts=[Part(root=TextPart(text=text))],
            task_id=task_id or None,
            context_id=context_id or None,
        )

    async def stream(self, text: str, task_id: str = '', context_id: str = '') -> AsyncIterator[Ev]:
        async for item in self._stream.send_message(self._message(text, task_id, context_id)):
            yield self._ev(item)

    async def send(self, text: str, task_id: str = '', context_id: str = '', poll: bool = False) -> Ev:
        client = self._poll if poll else self._unary
        out = [i async for i in client.send_message(self._message(text, task_id, context_id))]
        expect(len(out) == 1, f'non-streaming send yielded {len(out)} items')
        return self._ev(out[0])

    async def cancel(self, task_id: str) -> Ev:
        from a2a.types import TaskIdParams

        return self._task(await self._unary.cancel_task(TaskIdParams(id=task_id)))

    async def get(self, task_id: str) -> Ev:
        from a2a.types import TaskQueryParams

        return self._task(await self._unary.get_task(TaskQueryParams(id=task_id)))

    async def subscribe(self, task_id: str) -> AsyncIterator[Ev]:
        from a2a.types import TaskIdParams

        async for item in self._stream.resubscribe(TaskIdParams(id=task_id)):
            yield self._ev(item)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


async def collect(it: AsyncIterator[Ev]) -> list[Ev]:
    return [e async for e in it]


def check_ids(events: list[Ev]) -> None:
    """Every event, and every status message, names the one task and context."""
    task_ids = {e.task_id for e in events if e.kind != 'message'}
    context_ids = {e.context_id for e in events if e.kind != 'message'}
    expect(len(task_ids) == 1 and '' not in task_ids, f'task ids {task_ids}')
    expect(len(context_ids) == 1 and '' not in context_ids, f'context ids {context_ids}')
    for e in events:
        if e.kind == 'status' and e.text:
            expect(
                (e.msg_task_id, e.msg_context_id) == (e.task_id, e.context_id),
                f'status message ids ({e.msg_task_id}, {e.msg_context_id}) '
                f'!= ({e.task_id}, {e.context_id})',
            )


def expect_opening(events: list[Ev], working_text: str) -> list[Ev]:
    """Streams open with the submitted Task, then WORKING; returns the rest."""
    expect(len(events) >= 2, f'stream too short: {show(events)}')
    expect(
        events[0].kind == 'task' and events[0].state == 'submitted',
        f'first event should be the submitted Task: {events[0]}',
    )
    expect(
        events[1].kind == 'status' and events[1].state == 'working' and events[1].text == working_text,
        f'second event should be WORKING {working_text!r}: {events[1]}',
    )
    return events[2:]


async def case_card(c, streaming_expected: bool) -> str:
    name, streaming, urls = c.card_summary()
    expect(streaming is streaming_expected, f'capabilities.streaming = {streaming}')
    return f'{name}: {urls}'


async def case_echo(c) -> str:
    ev = await c.send('echo hello  world')
    expect(ev.kind == 'task' and ev.state == 'completed', f'expected a COMPLETED task, got {ev}')
    expect(ev.artifacts == [('echo', 'echo', 'echo hello  world')], f'artifacts {ev.artifacts}')
    expect(ev.text == '', f'COMPLETED should carry no status message, got {ev.text!r}')
    ev = await c.send('whatever else')
    expect(ev.artifacts == [('echo', 'echo', 'whatever else')], f'unknown word: {ev.artifacts}')
    return 'COMPLETED, artifact echo'


async def case_echo_streaming(c) -> str:
    events = await collect(c.stream('echo streamed'))
    check_ids(events)
    rest = expect_opening(events, '')
    expect(len(rest) == 2, f'expected artifact + COMPLETED: {show(events)}')
    expect(
        rest[0].kind == 'artifact' and (rest[0].artifact_id, rest[0].artifact_name, rest[0].text) == ('echo', 'echo', 'echo streamed'),
        f'artifact: {rest[0]}',
    )
    expect(rest[1].kind == 'status' and rest[1].state == 'completed' and rest[1].text == '', f'end: {rest[1]}')
    return show(events)


async def case_stream(c) -> str:
    events = await collect(c.stream('stream 5 20'))
    check_ids(events)
    rest = expect_opening(events, 'streaming')
    expect(len(rest) == 6, f'expected 5 chunks + COMPLETED: {show(events)}')
    for i, e in enumerate(rest[:5]):
        expect(
            e.kind == 'artifact'
            and (e.artifact_id, e.artifact_name, e.text) == ('out', 'out', f'chunk {i}')
            and e.append == (i > 0)
            and e.last_chunk == (i == 4),
            f'chunk {i}: {e}',
        )
    end = rest[5]
    expect(end.kind == 'status' and end.state == 'completed' and end.text == 'done', f'end: {end}')
    task = await c.get(end.task_id)
    expect(task.artifacts == [('out', 'out', '\n'.join(f'chunk {i}' for i in range(5)))], f'stored artifact {task.artifacts}')
    return show(events)


async def case_stream_unary(c) -> str:
    ev = await c.send('stream 3 0')
    expect(ev.kind == 'task' and ev.state == 'completed' and ev.text == 'done', f'got {ev}')
    expect(ev.artifacts == [('out', 'out', 'chunk 0\nchunk 1\nchunk 2')], f'artifacts {ev.artifacts}')
    return 'COMPLETED "done", chunks merged into one artifact'


async def case_ask(c) -> str:
    ev = await c.send('ask')
    expect(ev.kind == 'task' and ev.state == 'input-required' and ev.text == 'Which city?', f'turn 1: {ev}')
    done = await c.send('Paris', task_id=ev.task_id, context_id=ev.context_id)
    expect(done.task_id == ev.task_id, 'follow-up landed on another task')
    expect(done.state == 'completed', f'turn 2: {done}')
    expect(done.artifacts == [('answer', 'answer', 'city: Paris')], f'artifacts {done.artifacts}')
    return 'INPUT_REQUIRED "Which city?" -> COMPLETED "city: Paris"'


async def case_ask_again_streaming(c) -> str:
    first = await collect(c.stream('ask'))
    check_ids(first)
    rest = expect_opening(first, '')
    expect(len(rest) == 1 and rest[0].state == 'input-required' and rest[0].text == 'Which city?', f'turn 1: {show(first)}')
    tid, cid = rest[0].task_id, rest[0].context_id
    second = await collect(c.stream('again', task_id=tid, context_id=cid))
    check_ids(second)
    states = [(e.kind, e.state, e.text) for e in second]
    expect(
        states == [('status', 'working', ''), ('status', 'input-required', 'Which city, really?')],
        f'turn 2: {show(second)}',
    )
    third = await collect(c.stream('Lyon', task_id=tid, context_id=cid))
    check_ids(third)
    expect(
        [(e.kind, e.state, e.text) for e in third]
        == [('status', 'working', ''), ('artifact', '', 'city: Lyon'), ('status', 'completed', '')],
        f'turn 3: {show(third)}',
    )
    expect(third[0].task_id == tid, 'follow-up landed on another task')
    return f'turn 2: {show(second)}; turn 3: {show(third)}'


async def case_slow_cancel(c) -> str:
    ev = await c.send('slow', poll=True)
    expect(ev.kind == 'task' and ev.state in ('submitted', 'working'), f'non-blocking send: {ev}')
    await asyncio.sleep(0.3)
    running = await c.get(ev.task_id)
    expect(running.state == 'working' and running.text == 'working slowly', f'before cancel: {running}')
    started = time.monotonic()
    cancelled = await c.cancel(ev.task_id)
    expect(cancelled.state == 'canceled', f'cancel returned {cancelled}')
    after = await c.get(ev.task_id)
    expect(after.state == 'canceled', f'get after cancel: {after}')
    return f'non-blocking send -> {ev.state}; cancel took {time.monotonic() - started:.2f}s; get -> canceled'


async def case_slow_cancel_streaming(c) -> str:
    """Cancel while a streaming client watches: it must see CANCELED (or at least end)."""
    events: list[Ev] = []
    it = c.stream('slow')
    async for e in it:
        events.append(e)
        if e.kind == 'status' and e.state == 'working':
            break
    tid = events[0].task_id
    reader = asyncio.create_task(collect(it))
    await c.cancel(tid)
    tail = await asyncio.wait_for(reader, TIMEOUT)
    after = await c.get(tid)
    expect(after.state == 'canceled', f'get after cancel: {after}')
    return f'streaming client saw after cancel: {show(tail)}'


async def case_reply(c) -> str:
    ev = await c.send('reply')
    expect(ev.kind == 'message' and ev.text == 'pong' and not ev.task_id, f'non-streaming: {ev}')
    events = await collect(c.stream('reply'))
    expect(len(events) == 1 and events[0].kind == 'message' and events[0].text == 'pong', f'streaming: {show(events)}')
    return 'Message "pong" (both)'


async def case_fail(c) -> str:
    ev = await c.send('fail')
    expect(ev.kind == 'task' and ev.state == 'failed' and ev.text == 'upstream says no', f'got {ev}')
    events = await collect(c.stream('fail'))
    check_ids(events)
    rest = expect_opening(events, '')
    expect(
        len(rest) == 1 and rest[0].state == 'failed' and rest[0].text == 'upstream says no',
        f'streaming: {show(events)}',
    )
    return 'FAILED "upstream says no" (both)'


async def case_resubscribe(c) -> str:
    it = c.stream('stream 10 100')
    first: list[Ev] = []
    async for e in it:
        first.append(e)
        if e.kind == 'artifact' and e.text == 'chunk 2':
            break
    tid = first[0].task_id
    original = asyncio.create_task(collect(it))
    resub = await asyncio.wait_for(collect(c.subscribe(tid)), TIMEOUT)
    await asyncio.wait_for(original, TIMEOUT)

    snapshot = resub[0] if resub and resub[0].kind == 'task' else None
    rest = resub[1:] if snapshot else resub
    chunks = [e for e in rest if e.kind == 'artifact']
    expect(chunks, f'resubscribe got no chunks: {show(resub)}')
    start = int(chunks[0].text.split()[1])
    expect(start >= 3, f'resubscribe replayed chunk {start}')
    expect(
        [e.text for e in chunks] == [f'chunk {i}' for i in range(start, 10)],
        f'resubscribe chunks not the remaining suffix: {show(resub)}',
    )
    expect(all(e.append for e in chunks) and chunks[-1].last_chunk, 'append/last_chunk flags')
    expect(
        rest[-1].kind == 'status' and rest[-1].state == 'completed' and rest[-1].text == 'done',
        f'resubscribe should end COMPLETED: {show(resub)}',
    )
    if snapshot:
        return (
            f'opens with Task snapshot ({snapshot.state}, artifacts {snapshot.artifacts}); '
            f'then chunks {start}..9, COMPLETED'
        )
    return f'no Task snapshot: first event {resub[0]}; chunks {start}..9, COMPLETED'


CASES = [
    ('echo (non-streaming)', case_echo),
    ('echo (streaming)', case_echo_streaming),
    ('stream 5 20 (streaming, exact sequence)', case_stream),
    ('stream 3 0 (non-streaming)', case_stream_unary),
    ('ask + follow-up (non-streaming)', case_ask),
    ('ask + again + follow-up (streaming)', case_ask_again_streaming),
    ('slow + cancel (non-blocking send)', case_slow_cancel),
    ('slow + cancel (while streaming)', case_slow_cancel_streaming),
    ('reply', case_reply),
    ('fail', case_fail),
    ('resubscribe mid stream 10 100', case_resubscribe),
]


# --------------------------------------------------------------------------
# Agent process
# --------------------------------------------------------------------------


def start_agent(agent: str, extra: list[str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, agent, '--port', '0', *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    # readline() blocks until READY or EOF; the timer turns a hung start into EOF.
    watchdog = threading.Timer(30, proc.kill)
    watchdog.start()
    try:
        line = proc.stdout.readline()
    finally:
        watchdog.cancel()
    if not line.startswith('READY '):
        proc.kill()
        raise SystemExit(f'agent did not print READY (got {line!r})')
    return proc, int(line.split()[1])


def stop_agent(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run_cases(client, label: str, streaming_expected: bool) -> int:
    failures = 0
    await client.open()
    try:
        cases = [('card', lambda c: case_card(c, streaming_expected)), *CASES]
        for name, fn in cases:
            try:
                detail = await asyncio.wait_for(fn(client), 60)
                print(f'PASS [{label}] {name}: {detail}', flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on
                failures += 1
                print(f'FAIL [{label}] {name}: {type(e).__name__}: {e}', flush=True)
                if not isinstance(e, CheckFailed):
                    traceback.print_exc()
    finally:
        await client.close()
    return failures


async def run_no_streaming(version: str, base: str) -> int:
    """With --no-streaming the card says so and non-streaming sends still work."""
    client = V10(base, 'JSONRPC') if version == 'v10' else V03(base)
    await client.open()
    try:
        _, streaming, _ = client.card_summary()
        ev = await client.send('echo x')
        ok = streaming is False and ev.state == 'completed'
        print(f'{"PASS" if ok else "FAIL"} [{version} --no-streaming] card streaming={streaming}, echo -> {ev}')
        return 0 if ok else 1
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('--version', choices=['v10', 'v03'], required=True)
    parser.add_argument('--agent', help='agent script (default: agent_<version>.py next to this file)')
    args = parser.parse_args()
    agent = args.agent or os.path.join(HERE, f'agent_{args.version}.py')

    failures = 0
    proc, port = start_agent(agent, [])
    base = f'http://127.0.0.1:{port}'
    try:
        if args.version == 'v10':
            for binding in ('JSONRPC', 'HTTP+JSON'):
                failures += asyncio.run(run_cases(V10(base, binding), f'v10 {binding}', True))
        else:
            failures += asyncio.run(run_cases(V03(base), 'v03 JSONRPC', True))
    finally:
        stop_agent(proc)

    proc, port = start_agent(agent, ['--no-streaming'])
    try:
        failures += asyncio.run(run_no_streaming(args.version, f'http://127.0.0.1:{port}'))
    finally:
        stop_agent(proc)

    print(f'{"FAIL" if failures else "PASS"}: {failures} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
