#!/usr/bin/env python3
"""Google ADK's ``RemoteA2aAgent`` against the server, as an ADK application uses it.

Usage: adk_client.py DEFAULT_URL [FLAG_URL]
  DEFAULT_URL  base URL of a server with the default card (gRPC listed as a bare host:port)
  FLAG_URL     base URL of a server started with --card-interfaces jsonrpc,http-json
               ("-" or absent: the checks that need it are reported as FAIL; "skip": SKIP)

The remote agent is the root agent of an ``InMemoryRunner``: ADK's ``RemoteA2aAgent`` sends the
user's message to the remote agent itself (``_run_async_impl`` resolves the card, builds an
a2a-sdk client from it and calls ``send_message``), so no model and no LLM is involved. Each
scenario runs in a fresh session; input-required is answered in the same session, where ADK
continues the paused task (``_get_resumable_task_id``).

Configurations, one label each:
  - card URL, default card: ADK refuses the card before any call (the reason the flag exists);
  - card object, default card: the card fetched with a2a-sdk's ``A2ACardResolver`` and passed
    as ``agent_card=``; ADK checks only cards it fetched itself;
  - card URL, --card-interfaces jsonrpc,http-json: ADK's documented way, over JSON-RPC (ADK's
    first choice) and over HTTP+JSON (the client limited to it).

Works with a2a-sdk 1.x and 0.3 underneath (ADK supports both). Prints ``ok - [LABEL] scenario:
detail`` or ``FAIL - [LABEL] scenario: reason`` per check; non-zero exit if any failed.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
import warnings
from importlib.metadata import version

warnings.filterwarnings('ignore')  # ADK's "[EXPERIMENTAL]" UserWarning on every A2A class

import httpx  # noqa: E402
from checks import check, report, tally  # noqa: E402
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory  # noqa: E402
from google.adk.agents.remote_a2a_agent import AGENT_CARD_WELL_KNOWN_PATH, RemoteA2aAgent  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

A2A_VERSION = version('a2a-sdk')
A2A_V1 = not A2A_VERSION.startswith('0.')
SDK = f'adk {version("google-adk")}/a2a-sdk {A2A_VERSION}'
# The demo agent's texts (src/agent/demo.rs).
QUESTION = 'What should I echo back?'
FAILED_TEXT = 'The demo agent failed, as asked.'
REFUSAL = 'Agent card RPC URL must use https, or http on a loopback host'

def client_factory(binding: str, streaming: bool) -> ClientFactory | None:
    """None (ADK builds its own client: JSON-RPC first, then HTTP+JSON; streaming on a2a-sdk
    1.x, off on 0.3) when that is what is asked; otherwise the same client limited to one
    binding, with streaming on or off."""
    if binding == 'JSONRPC' and streaming == A2A_V1:
        return None
    if A2A_V1:
        config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding])
    else:
        from a2a.types import TransportProtocol

        transport = {'JSONRPC': TransportProtocol.jsonrpc, 'HTTP+JSON': TransportProtocol.http_json}[binding]
        config = ClientConfig(streaming=streaming, polling=False, supported_transports=[transport])
    return ClientFactory(config)


def state_name(state: object) -> str:
    """'completed', 'input-required', … from what ADK records of either SDK's task (the 1.x
    ProtoJSON name TASK_STATE_COMPLETED, or 0.3's TaskState enum, value input-required)."""
    text = str(getattr(state, 'value', state) or '')
    return text.removeprefix('TASK_STATE_').lower().replace('_', '-')


class Turn:
    """What one user turn through the Runner produced."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.errors: list[str] = []

    @property
    def texts(self) -> list[str]:
        return [t for e in self.events for t in e['texts']]

    @property
    def states(self) -> list[str]:
        return [e['state'] for e in self.events if e['state']]

    @property
    def task_ids(self) -> set[str]:
        return {e['task'] for e in self.events if e['task']}

    @property
    def questions(self) -> list[str]:
        return [q for e in self.events for q in e['questions']]


async def turn(runner: InMemoryRunner, session_id: str, text: str) -> Turn:
    out = Turn()
    start = time.monotonic()
    message = types.Content(role='user', parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id='ci', session_id=session_id, new_message=message):
        if event.error_message:
            out.errors.append(event.error_message)
        metadata = event.custom_metadata or {}
        response = metadata.get('a2a:response')
        status = response.get('status') if isinstance(response, dict) else None
        parts = event.content.parts if event.content and event.content.parts else []
        out.events.append(
            {
                'at': time.monotonic() - start,
                'partial': event.partial,
                'texts': [p.text for p in parts if p.text and not p.thought],
                # ADK turns INPUT_REQUIRED into a long-running mock function call that carries
                # the agent's question.
                'questions': [
                    str((p.function_call.args or {}).get('input_required'))
                    for p in parts
                    if p.function_call and p.function_call.name.endswith('required_user_input')
                ],
                'state': state_name(status.get('state')) if isinstance(status, dict) else '',
                'task': metadata.get('a2a:task_id'),
            }
        )
    return out


async def session(runner: InMemoryRunner) -> str:
    created = await runner.session_service.create_session(app_name=runner.app_name, user_id='ci')
    return created.id


def new_runner(agent_card, factory: ClientFactory | None = None) -> InMemoryRunner:
    name = f'remote_{uuid.uuid4().hex[:8]}'
    kwargs = {'a2a_client_factory': factory} if factory is not None else {}
    agent = RemoteA2aAgent(name=name, agent_card=agent_card, **kwargs)
    return InMemoryRunner(agent=agent, app_name='a2a_server_ci')


def summary(t: Turn) -> str:
    return f'states={t.states} texts={t.texts} errors={t.errors}'


async def scenarios(label: str, agent_card, binding: str) -> None:
    """send, stream, input-required then answer, fail: each through a Runner, checked by the
    task states and texts ADK hands the application."""

    async def send():
        # Streaming off: one blocking SendMessage, answered by the finished task.
        runner = new_runner(agent_card, client_factory(binding, streaming=False))
        text = f'hello from ADK {uuid.uuid4().hex[:6]}'
        t = await turn(runner, await session(runner), text)
        ok = not t.errors and t.states and t.states[-1] == 'completed' and text in t.texts
        ok = ok and len(t.task_ids) == 1 and 'working' not in t.states
        return bool(ok), f'blocking, one task COMPLETED, echo {text!r}' if ok else summary(t)

    async def stream():
        chunks, gap_ms = 4, 150
        runner = new_runner(agent_card, client_factory(binding, streaming=True))
        t = await turn(runner, await session(runner), f'stream {chunks} {gap_ms}')
        chunk_events = [e for e in t.events if any(x.startswith('chunk ') for x in e['texts'])]
        got = [x for e in chunk_events for x in e['texts']]
        want = [f'chunk {i}' for i in range(chunks)]
        spread = chunk_events[-1]['at'] - chunk_events[0]['at'] if chunk_events else 0.0
        # Each chunk is its own event (partial until the last), as the server produced them:
        # the first and last arrive at least most of the agent's gaps apart.
        ok = not t.errors and got == want and len(chunk_events) == chunks
        ok = ok and [e['partial'] for e in chunk_events] == [True] * (chunks - 1) + [False]
        ok = ok and spread >= 0.6 * (chunks - 1) * gap_ms / 1000 and t.states[-1] == 'completed'
        detail = f'{len(chunk_events)} chunk events over {spread * 1000:.0f} ms, COMPLETED'
        return bool(ok), detail if ok else f'{summary(t)} spread={spread:.3f}s'

    async def input_then_answer():
        runner = new_runner(agent_card, client_factory(binding, streaming=True))
        sid = await session(runner)
        first = await turn(runner, sid, 'input')
        ok1 = not first.errors and first.states[-1:] == ['input-required'] and QUESTION in first.questions
        if not ok1:
            return False, f'first turn: {summary(first)} questions={first.questions}'
        answer = f'the answer {uuid.uuid4().hex[:6]}'
        second = await turn(runner, sid, answer)
        same_task = second.task_ids == first.task_ids and len(first.task_ids) == 1
        ok2 = not second.errors and second.states[-1:] == ['completed'] and answer in second.texts
        detail = f'INPUT_REQUIRED {QUESTION!r}, answer in the same session continued task {next(iter(first.task_ids))[:8]}…, COMPLETED echoing it'
        return bool(ok2 and same_task), detail if ok2 and same_task else (
            f'second turn: {summary(second)} tasks {first.task_ids} -> {second.task_ids}'
        )

    async def fail():
        runner = new_runner(agent_card, client_factory(binding, streaming=True))
        t = await turn(runner, await session(runner), 'fail')
        ok = t.states[-1:] == ['failed'] and FAILED_TEXT in t.texts
        return bool(ok), f'FAILED, {FAILED_TEXT!r}' if ok else summary(t)

    await check(label, 'send', send)
    await check(label, 'stream', stream)
    await check(label, 'input→answer', input_then_answer)
    await check(label, 'fail', fail)


async def fetch_card(base_url: str):
    async with httpx.AsyncClient(timeout=10) as client:
        return await A2ACardResolver(client, base_url).get_agent_card()


async def main() -> int:
    default_url = sys.argv[1]
    flag_url = sys.argv[2] if len(sys.argv) > 2 else '-'
    card_url = f'{default_url}{AGENT_CARD_WELL_KNOWN_PATH}'
    grpc_target = default_url.removeprefix('http://')

    # 1. The documented way against the default card: refused before any call.
    async def refused():
        runner = new_runner(card_url)
        t = await turn(runner, await session(runner), 'hello')
        want = f'{REFUSAL}: {grpc_target}'
        ok = any(want in e for e in t.errors) and not t.task_ids and not t.texts
        return ok, f'refused before any call: "{want}"' if ok else summary(t)

    await check(f'{SDK} | card URL, default card', 'card refused', refused)

    # 2. The card object, fetched by the application and passed in: not checked by ADK.
    label = f'{SDK} | card object, default card | JSONRPC'
    try:
        card = await fetch_card(default_url)
    except Exception as exc:  # noqa: BLE001
        report(label, 'all', False, f'A2ACardResolver: {type(exc).__name__}: {exc}')
    else:
        await scenarios(label, card, 'JSONRPC')

    # 3. The card URL against a server whose card lists only the HTTP bindings.
    for binding in ('JSONRPC', 'HTTP+JSON'):
        label = f'{SDK} | card URL, --card-interfaces jsonrpc,http-json | {binding}'
        if flag_url == 'skip':
            print(f'SKIP - [{label}] all: the server binary has no --card-interfaces', flush=True)
            continue
        if flag_url == '-':
            report(label, 'all', False, 'no server with --card-interfaces (the binary lacks the flag)')
            continue
        await scenarios(label, f'{flag_url}{AGENT_CARD_WELL_KNOWN_PATH}', binding)

    return tally()


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
