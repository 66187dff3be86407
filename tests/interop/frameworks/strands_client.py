#!/usr/bin/env python3
"""strands-agents' ``A2AAgent`` against a server with the default card.

Usage: strands_client.py BASE_URL

``A2AAgent(BASE_URL)`` fetches the card as strands does (a2a-sdk 0.3's ``A2ACardResolver``, no
``A2A-Version``: the card with the v0.3 fields) and sends through a2a-sdk 0.3's
``ClientFactory``, always streaming. Run over JSON-RPC (strands' default) and HTTP+JSON (a
``client_config`` limited to it). No model and no LLM is involved: ``A2AAgent`` is the remote
agent's client, not an LLM agent.

``A2AAgent`` (1.62) sends every prompt as a new message with no ``taskId``, so it cannot answer
an INPUT_REQUIRED task itself (its own converter refuses interrupt responses). The answer is
sent the way a strands application has to: with the a2a-sdk 0.3 client built from the same card
and ``ClientConfig`` that ``A2AAgent`` uses, naming the task ``A2AAgent`` reported.

Prints ``ok - [LABEL] scenario: detail`` or ``FAIL - [LABEL] scenario: reason`` per check;
non-zero exit if any failed.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
import warnings
from importlib.metadata import version

warnings.filterwarnings('ignore')

import httpx  # noqa: E402
from checks import check, report, tally  # noqa: E402
from a2a.client import ClientConfig, ClientFactory  # noqa: E402
from a2a.types import (  # noqa: E402
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TextPart,
    TransportProtocol,
)
from strands.agent.a2a_agent import A2AAgent  # noqa: E402

SDK = f'strands {version("strands-agents")}/a2a-sdk {version("a2a-sdk")}'
QUESTION = 'What should I echo back?'
FAILED_TEXT = 'The demo agent failed, as asked.'
TRANSPORTS = {'JSONRPC': TransportProtocol.jsonrpc, 'HTTP+JSON': TransportProtocol.http_json}

def texts(result) -> list[str]:
    return [block['text'] for block in result.message.get('content', []) if 'text' in block]


def outcome(result) -> str:
    return f'stop_reason={result.stop_reason} state={result.state} texts={texts(result)}'


async def run(agent: A2AAgent, prompt: str):
    """stream_async as an application reads it: the raw A2A events, each with its arrival time
    and the text of its artifact update read on arrival (a2a-sdk 0.3 keeps the first chunk's
    artifact as the task's and appends later chunks to it, so read afterwards the first update
    would hold every chunk), and the AgentResult strands makes of them."""
    events, result, start = [], None, time.monotonic()
    async for event in agent.stream_async(prompt):
        if event.get('type') == 'a2a_stream':
            raw = event['event']
            update = raw[1] if isinstance(raw, tuple) else None
            chunk = [p.root.text for p in update.artifact.parts] if isinstance(update, TaskArtifactUpdateEvent) else None
            events.append((time.monotonic() - start, raw, chunk))
        elif 'result' in event:
            result = event['result']
    return events, result


async def scenarios(base_url: str, binding: str) -> None:
    label = f'{SDK} | A2AAgent, default card | {binding}'
    http = httpx.AsyncClient(timeout=30)
    # JSON-RPC is strands' default; other bindings through a client_config limited to them.
    config = None if binding == 'JSONRPC' else ClientConfig(httpx_client=http, supported_transports=[TRANSPORTS[binding]])

    def agent() -> A2AAgent:
        return A2AAgent(base_url, timeout=30, client_config=config)

    async def send():
        text = f'hello from strands {uuid.uuid4().hex[:6]}'
        result = await agent().invoke_async(text)
        ok = result.stop_reason == 'end_turn' and result.state == {'a2a_task_state': 'completed'}
        ok = ok and texts(result) == [text]
        return ok, f'AgentResult end_turn, completed, echo {text!r}' if ok else outcome(result)

    async def stream():
        chunks, gap_ms = 4, 150
        events, result = await run(agent(), f'stream {chunks} {gap_ms}')
        arrivals = [(at, chunk) for at, _, chunk in events if chunk is not None]
        got = [text for _, parts in arrivals for text in parts]
        spread = arrivals[-1][0] - arrivals[0][0] if arrivals else 0.0
        want = [f'chunk {i}' for i in range(chunks)]
        ok = got == want and spread >= 0.6 * (chunks - 1) * gap_ms / 1000
        ok = ok and result is not None and result.state == {'a2a_task_state': 'completed'}
        ok = ok and texts(result) == want
        detail = f'{len(arrivals)} artifact updates over {spread * 1000:.0f} ms, AgentResult completed with all chunks'
        return ok, detail if ok else f'chunks={got} spread={spread:.3f}s {result and outcome(result)}'

    async def input_then_answer():
        remote = agent()
        events, result = await run(remote, 'input')
        ok1 = result is not None and result.stop_reason == 'interrupt'
        ok1 = ok1 and result.state == {'a2a_task_state': 'input-required'} and texts(result) == [QUESTION]
        tasks = {event[0].id: event[0].context_id for _, event, _ in events if isinstance(event, tuple)}
        if not ok1 or len(tasks) != 1:
            return False, f'first turn: {result and outcome(result)} tasks={tasks}'
        ((task_id, context_id),) = tasks.items()
        # The answer names the task, through the client A2AAgent itself would build.
        answer = f'the answer {uuid.uuid4().hex[:6]}'
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.user,
            parts=[Part(root=TextPart(text=answer))],
            task_id=task_id,
            context_id=context_id,
        )
        answer_config = config or ClientConfig(httpx_client=http)
        client = ClientFactory(answer_config).create(await remote.get_agent_card())
        final = None
        async for event in client.send_message(message):
            if isinstance(event, tuple):
                final = event[0]
        ok2 = final is not None and final.id == task_id and final.status.state.value == 'completed'
        echoed = [p.root.text for a in (final.artifacts or []) for p in a.parts] if final else []
        ok2 = ok2 and answer in echoed
        detail = (
            f'A2AAgent: stop_reason interrupt, input-required {QUESTION!r}; the answer (a2a-sdk client '
            f'from the same card: A2AAgent sends no taskId) completed task {task_id[:8]}…, echoing it'
        )
        return ok2, detail if ok2 else f'answer: task={final and final.id} want {task_id} state={final and final.status.state} echoed={echoed}'

    async def fail():
        result = await agent().invoke_async('fail')
        ok = result.stop_reason == 'end_turn' and result.state == {'a2a_task_state': 'failed'}
        ok = ok and texts(result) == [FAILED_TEXT]
        return ok, f'AgentResult end_turn, failed, {FAILED_TEXT!r}' if ok else outcome(result)

    try:
        await check(label, 'send', send)
        await check(label, 'stream', stream)
        await check(label, 'input→answer', input_then_answer)
        await check(label, 'fail', fail)
    finally:
        await http.aclose()


async def main() -> int:
    base_url = sys.argv[1]
    for binding in ('JSONRPC', 'HTTP+JSON'):
        await scenarios(base_url, binding)
    return tally()


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
