#!/usr/bin/env python3
"""A Google ADK agent served with ``to_a2a``, fronted by the server (``--agent a2a``).

Usage: adk_upstream.py SERVER_BINARY
       adk_upstream.py --serve          (internal: runs the ADK agent, prints its port)

The README's "Put a2a-server in front of an existing agent" with ADK, end to end and without an
LLM: ``EchoAgent`` is a ``BaseAgent`` whose ``_run_async_impl`` yields what a streaming
``LlmAgent`` would (two partial events, 0.2 s apart, then the whole reply ``ADK heard: <text>
(turn N)``, N counting the user's turns in the ADK session); ``fail`` yields an event with an
``error_code``. It is served by ``google.adk.a2a.utils.agent_to_a2a.to_a2a`` under uvicorn on a
free loopback port, and ``SERVER_BINARY --listen 127.0.0.1:0 --agent a2a --upstream <its card>``
relays it. The client is the a2a-sdk of this venv (1.x or 0.3, as ADK's executor is), over
JSON-RPC, against the relay's own card.

What ADK's executor (the legacy ``A2aAgentExecutor``, google-adk 2.13) sends for one run: the
task (a2a-sdk 1.x) or a SUBMITTED status update carrying the user's message (0.3), a WORKING
status, one WORKING status per ADK event with content (its text as the status message, partial
or not), an artifact update holding the last event's parts, then COMPLETED; an ADK error event
becomes FAILED with its ``error_message``. The ADK session is the A2A context id.

Scenarios (one ``ok``/``FAIL`` line each; non-zero exit if any failed):
  - relayed card: the relay's card shows the ADK agent's name, description and skills, with the
    relay's interfaces;
  - send: a blocking send answered by the COMPLETED task, its artifact ``ADK heard: hello``;
  - stream: the task, WORKING statuses with the partial texts as ADK produced them (spread over
    the agent's pauses), the artifact, COMPLETED;
  - next turn: a new task in the first one's context reaches the same ADK session (turn 2);
  - fail: FAILED with ADK's error message.
Both processes are stopped at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import AsyncGenerator
from urllib.parse import urlsplit

warnings.filterwarnings('ignore')  # ADK's "[EXPERIMENTAL]" UserWarning on every A2A class

import httpx  # noqa: E402
from google.adk.agents import BaseAgent  # noqa: E402
from google.adk.agents.invocation_context import InvocationContext  # noqa: E402
from google.adk.events import Event  # noqa: E402
from google.genai import types  # noqa: E402

A2A_VERSION = version('a2a-sdk')
A2A_V1 = not A2A_VERSION.startswith('0.')
LABEL = f'adk {version("google-adk")}/a2a-sdk {A2A_VERSION} | to_a2a agent behind --agent a2a | JSONRPC'
SCENARIOS = ['relayed card', 'send', 'stream', 'next turn', 'fail']
AGENT_NAME = 'adk_echo'
AGENT_DESCRIPTION = 'Replies "ADK heard: <text>", without an LLM.'
FAILED_TEXT = 'ADK failed, as asked.'
PAUSE_S = 0.2  # between the agent's events
CARD_PATH = '/.well-known/agent-card.json'


# --- the ADK agent -------------------------------------------------------------------------------


class EchoAgent(BaseAgent):
    """No model: yields the events a streaming LlmAgent would, deterministically."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        parts = ctx.user_content.parts if ctx.user_content and ctx.user_content.parts else []
        text = ''.join(p.text or '' for p in parts)
        if text == 'fail':
            yield Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                error_code='ADK_ECHO_FAILED',
                error_message=FAILED_TEXT,
            )
            return
        turn = sum(1 for e in ctx.session.events if e.author == 'user')
        chunks = [('ADK heard: ', True), (text, True), (f'ADK heard: {text} (turn {turn})', False)]
        for i, (chunk, partial) in enumerate(chunks):
            if i:
                await asyncio.sleep(PAUSE_S)
            yield Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                partial=partial,
                content=types.Content(role='model', parts=[types.Part(text=chunk)]),
            )


def serve() -> None:
    """Runs the agent under uvicorn on a free loopback port; prints `ADK agent on PORT`."""
    import uvicorn
    from google.adk.a2a.utils.agent_to_a2a import to_a2a

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', 0))  # bound first, so the card names the right port
    port = sock.getsockname()[1]
    app = to_a2a(EchoAgent(name=AGENT_NAME, description=AGENT_DESCRIPTION), host='127.0.0.1', port=port)
    print(f'ADK agent on {port}', flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level='warning'))
    asyncio.run(server.serve(sockets=[sock]))


# --- the two processes ---------------------------------------------------------------------------


class Processes:
    """The ADK agent and the relay, their output in files of a temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix='adk-upstream-'))
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str]) -> None:
        out = open(self.dir / f'{name}.out', 'wb')
        err = open(self.dir / f'{name}.err', 'wb')
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def line(self, name: str, prefix: str, timeout: float = 60.0) -> str:
        """The first stdout line of NAME starting with PREFIX."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in (self.dir / f'{name}.out').read_text(errors='replace').splitlines():
                if line.startswith(prefix):
                    return line
            if self.procs[name].poll() is not None:
                raise RuntimeError(f'{name} exited with {self.procs[name].returncode} before printing {prefix!r}')
            time.sleep(0.05)
        raise RuntimeError(f'{name} printed no {prefix!r} line in {timeout:.0f} s')

    def alive(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def tails(self) -> None:
        for path in sorted(self.dir.iterdir()):
            lines = path.read_text(errors='replace').splitlines()[-30:]
            print(f'---- {path.name} ----', *lines, sep='\n', file=sys.stderr)


async def wait_for_card(url: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                response = await http.get(url)
                if response.status_code == 200:
                    return response.json()
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f'no card at {url} within {timeout:.0f} s')
            await asyncio.sleep(0.1)


# --- the a2a-sdk client, either version, reduced to plain events ---------------------------------


def state_name(state: object) -> str:
    """'completed', 'input-required', … from a 1.x TaskState number or a 0.3 TaskState."""
    if A2A_V1:
        from a2a.types import TaskState

        state = TaskState.Name(state)
    text = str(getattr(state, 'value', state))
    return text.removeprefix('TASK_STATE_').lower().replace('_', '-')


def part_texts(parts) -> list[str]:
    if A2A_V1:
        return [p.text for p in parts if p.text]
    return [p.root.text for p in parts if getattr(p.root, 'text', None)]


def to_dict(metadata) -> dict:
    if not A2A_V1:
        return dict(metadata or {})
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(metadata)


class Relay:
    """An a2a-sdk client of the relay, built from the relay's card."""

    def __init__(self, card) -> None:
        self.card = card

    def client(self, streaming: bool):
        from a2a.client import ClientConfig, ClientFactory

        if A2A_V1:
            config = ClientConfig(streaming=streaming, supported_protocol_bindings=['JSONRPC'])
        else:
            from a2a.types import TransportProtocol

            config = ClientConfig(streaming=streaming, polling=False, supported_transports=[TransportProtocol.jsonrpc])
        return ClientFactory(config).create(self.card)

    async def send(self, text: str, streaming: bool, context_id: str | None = None) -> list[dict]:
        """Sends TEXT; the answers as {'kind', 'state', 'texts', 'task', 'context', 'metadata', 'at'}."""
        client = self.client(streaming)
        events: list[dict] = []
        start = time.monotonic()
        try:
            async for item in client.send_message(self.request(text, context_id)):
                for event in self.events(item):
                    event['at'] = time.monotonic() - start
                    events.append(event)
        finally:
            await client.close()
        return events

    def request(self, text: str, context_id: str | None):
        if A2A_V1:
            from a2a.types import Message, Part, Role, SendMessageRequest

            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
            if context_id:
                message.context_id = context_id
            return SendMessageRequest(message=message)
        from a2a.types import Message, Part, Role, TextPart

        return Message(
            message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text=text))], context_id=context_id
        )

    @staticmethod
    def event(kind: str, state: str, texts: list[str], task: str, context: str, metadata=None) -> dict:
        return {'kind': kind, 'state': state, 'texts': texts, 'task': task, 'context': context,
                'metadata': to_dict(metadata) if metadata else {}}

    def task_event(self, task) -> dict:
        texts = [t for a in task.artifacts or [] for t in part_texts(a.parts)]
        if task.status.message:
            texts += part_texts(task.status.message.parts)
        event = self.event('task', state_name(task.status.state), texts, task.id, task.context_id, task.metadata)
        # The user's message once: ADK on a2a-sdk 0.3 echoes it in a SUBMITTED status, which the
        # relay must not add to the history a second time.
        event['user_messages'] = sum(1 for m in task.history or [] if is_user(m))
        return event

    def update_event(self, update) -> dict:
        if hasattr(update, 'artifact'):
            texts = part_texts(update.artifact.parts)
            return self.event('artifact', '', texts, update.task_id, update.context_id, update.metadata)
        message = update.status.message if not A2A_V1 or update.status.HasField('message') else None
        texts = part_texts(message.parts) if message else []
        state = state_name(update.status.state)
        return self.event('status', state, texts, update.task_id, update.context_id, update.metadata)

    def events(self, item) -> list[dict]:
        if A2A_V1:  # a StreamResponse
            kind = item.WhichOneof('payload')
            if kind == 'task':
                return [self.task_event(item.task)]
            if kind == 'message':
                return [self.event('message', '', part_texts(item.message.parts), '', item.message.context_id)]
            return [self.update_event(getattr(item, kind))]
        # a2a-sdk 0.3: a Message, or (the task so far, the update that made it, or None).
        if not isinstance(item, tuple):
            return [self.event('message', '', part_texts(item.parts), '', item.context_id)]
        task, update = item
        return [self.task_event(task) if update is None else self.update_event(update)]


def is_user(message) -> bool:
    if A2A_V1:
        from a2a.types import Role

        return message.role == Role.ROLE_USER
    return getattr(message.role, 'value', message.role) == 'user'


def brief(events: list[dict]) -> str:
    return ' '.join(f"{e['kind']}({', '.join([e['state']] * bool(e['state']) + list(map(repr, e['texts'])))})" for e in events)


# --- the scenarios -------------------------------------------------------------------------------


async def scenarios(relay: Relay, relay_card: dict, adk_card: dict, relay_base: str, adk_base: str) -> None:
    from checks import check

    async def card():
        def skills(c: dict) -> list[tuple]:
            return [(s.get('id'), s.get('name'), s.get('description')) for s in c.get('skills', [])]

        def port(url: str) -> int | None:  # gRPC's is a bare host:port
            return urlsplit(url if '://' in url else f'//{url}').port

        urls = [i.get('url', '') for i in relay_card.get('supportedInterfaces', [])] + [relay_card.get('url', '')]
        ok = relay_card.get('name') == adk_card.get('name') == AGENT_NAME
        ok = ok and relay_card.get('description') == adk_card.get('description') == AGENT_DESCRIPTION
        ok = ok and skills(relay_card) == skills(adk_card) != []
        ok = ok and all(port(u) == port(relay_base) for u in urls if u)
        ok = ok and bool(relay_card.get('capabilities', {}).get('streaming'))
        detail = f"name {relay_card.get('name')!r}, skills {[s[0] for s in skills(relay_card)]}, the relay's interfaces"
        return ok, detail if ok else f'relay card {json.dumps(relay_card)[:600]}, ADK card {json.dumps(adk_card)[:400]}'

    first: dict = {}

    async def send():
        events = await relay.send('hello', streaming=False)
        task = events[-1] if events else {}
        upstream = task.get('metadata', {}).get('a2aServerUpstream', {})
        ok = len(events) == 1 and task['kind'] == 'task' and task['state'] == 'completed'
        ok = ok and any(t.startswith('ADK heard: hello') for t in task['texts']) and bool(upstream.get('taskId'))
        ok = ok and task.get('user_messages') == 1
        if ok:
            first.update(task)
        if not ok:
            return False, f"{brief(events)}, user messages in history: {task.get('user_messages')}"
        return True, f"COMPLETED, the user's message once in history, artifact {task['texts'][0]!r}, upstream task {upstream['taskId'][:8]}…"

    async def stream():
        events = await relay.send('hello', streaming=True)
        kinds = [e['kind'] for e in events]
        said = [t for e in events if e['kind'] == 'status' and e['state'] == 'working' for t in e['texts']]
        final = 'ADK heard: hello (turn 1)'
        artifact = [t for e in events if e['kind'] == 'artifact' for t in e['texts']]
        # When the first partial and the whole reply arrived: the agent's two pauses apart.
        timed = [e['at'] for e in events if e['kind'] == 'status' and e['texts'][:1] in (['ADK heard: '], [final])]
        spread = timed[-1] - timed[0] if len(timed) == 2 else 0.0
        ok = kinds[:1] == ['task'] and events[0]['state'] == 'submitted'
        ok = ok and said == ['ADK heard: ', 'hello', final] and artifact == [final]
        ok = ok and events[-1]['kind'] == 'status' and events[-1]['state'] == 'completed'
        ok = ok and len({e['task'] for e in events}) == 1 and spread >= 1.5 * PAUSE_S
        detail = f'{len(events)} events: partials {said[:2]!r}, {final!r} {spread * 1000:.0f} ms later, artifact, COMPLETED'
        return ok, detail if ok else f'{brief(events)} spread={spread:.3f}s'

    async def next_turn():
        if not first:
            return False, 'needs the send scenario'
        events = await relay.send('again', streaming=False, context_id=first['context'])
        task = events[-1] if events else {}
        ok = len(events) == 1 and task['state'] == 'completed' and task['context'] == first['context']
        ok = ok and task['task'] != first['task'] and 'ADK heard: again (turn 2)' in task['texts']
        detail = f"a new task in context {first['context'][:8]}…: 'ADK heard: again (turn 2)', the same ADK session"
        return ok, detail if ok else brief(events)

    async def fail():
        events = await relay.send('fail', streaming=False)
        task = events[-1] if events else {}
        ok = len(events) == 1 and task['state'] == 'failed' and FAILED_TEXT in task['texts']
        return ok, f'FAILED, {FAILED_TEXT!r}' if ok else brief(events)

    await check(LABEL, 'relayed card', card)
    await check(LABEL, 'send', send)
    await check(LABEL, 'stream', stream)
    await check(LABEL, 'next turn', next_turn)
    await check(LABEL, 'fail', fail)


async def run(binary: str, procs: Processes) -> None:
    from checks import report

    procs.start('adk', [sys.executable, '-W', 'ignore', __file__, '--serve'])
    adk_port = int(procs.line('adk', 'ADK agent on ').rsplit(' ', 1)[1])
    adk_base = f'http://127.0.0.1:{adk_port}'
    adk_card = await wait_for_card(adk_base + CARD_PATH)

    procs.start('relay', [binary, '--listen', '127.0.0.1:0', '--agent', 'a2a', '--upstream', adk_base + CARD_PATH])
    # a2a-server listening on 127.0.0.1:PORT (…); card at …
    addr = procs.line('relay', 'a2a-server listening on ').split()[3]
    relay_base = f'http://{addr}'
    relay_card = await wait_for_card(relay_base + CARD_PATH)
    print(f'# ADK agent at {adk_base}, relayed by {relay_base}', flush=True)

    from a2a.client import A2ACardResolver

    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, relay_base).get_agent_card()
    await scenarios(Relay(card), relay_card, adk_card, relay_base, adk_base)
    gone = [n for n in procs.procs if n not in procs.alive()]
    if gone:
        report(LABEL, 'processes', False, f'{", ".join(gone)} exited during the checks')


def main() -> int:
    if sys.argv[1:] == ['--serve']:
        serve()
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from checks import report, results, tally

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    procs = Processes()
    try:
        asyncio.run(run(os.path.abspath(sys.argv[1]), procs))
    except Exception as exc:  # noqa: BLE001 - a start-up failure fails every scenario not run
        for scenario in SCENARIOS[len(results):]:
            report(LABEL, scenario, False, f'{type(exc).__name__}: {exc}')
    finally:
        procs.stop()
    status = tally()
    if status:
        procs.tails()
        print(f'(the processes\' output: {procs.dir})', file=sys.stderr)
    else:
        shutil.rmtree(procs.dir, ignore_errors=True)
    return status


if __name__ == '__main__':
    sys.exit(main())
