#!/usr/bin/env python3
"""Resume interop: a client built with the official A2A Python SDK's gRPC transport, plus
service parameters (gRPC metadata), loses its SubscribeToTask stream mid-task (its connection
is killed) and resumes it with the resume extension (docs/extensions/resume.md): nothing is
missing, nothing repeated, and the joined stream equals an uninterrupted subscriber's.

Usage: resume_interop.py BASE_URL   (where the Agent Card lives)

The SDK (1.3) predates A2A 1.1's ``generation`` fields: on gRPC they arrive as unknown
protobuf fields, read here with ``google.protobuf.unknown_fields``.

Output: ``ok - [GRPC] <name>`` or ``FAIL - [GRPC] <name>: <reason>``, then ``N passed, M failed``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import grpc
import httpx

from google.protobuf import unknown_fields

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol

RESUME = 'https://github.com/a2a-server/extensions/resume/v1'
TOTAL = 16  # chunks the task streams, 150 ms apart
CUT_AT = 6  # the first stream is killed once it has seen this generation
LIMIT = 30.0


class CheckFailed(Exception):
    pass


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def generation(ev: StreamResponse) -> int:
    """The dev-1.1 generation of a stream item (an unknown field to this SDK)."""
    for name, number in (('task', 7), ('status_update', 5), ('artifact_update', 7)):
        if ev.HasField(name):
            for field in unknown_fields.UnknownFieldSet(getattr(ev, name)):
                if field.field_number == number:
                    return field.data
            return 0
    return 0


def chunk_text(ev: StreamResponse) -> str | None:
    if ev.HasField('artifact_update'):
        return ev.artifact_update.artifact.parts[0].text
    return None


def client(card, streaming: bool):
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=[TransportProtocol.GRPC.value],
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url),
    )
    return ClientFactory(config).create(card)


def context(**parameters: str) -> ClientCallContext:
    return ClientCallContext(timeout=LIMIT + 10, service_parameters={'A2A-Extensions': RESUME, **parameters})


async def check_card(card) -> None:
    uris = [e.uri for e in card.capabilities.extensions]
    expect(RESUME in uris, f'the card declares {RESUME}; it declares {uris}')


async def check_cut_and_resume(card) -> None:
    starter = client(card, streaming=False)
    request = SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=f'stream {TOTAL} 150')]
        )
    )
    request.configuration.return_immediately = True
    started = [ev async for ev in starter.send_message(request, context=context())]
    await starter.close()
    expect(len(started) == 1 and started[0].HasField('task'), f'SendMessage answered {started}')
    task_id = started[0].task.id

    # An uninterrupted subscriber, for reference.
    steady = client(card, streaming=True)
    steady_events: list[StreamResponse] = []

    async def follow_steadily() -> None:
        async for ev in steady.subscribe(SubscribeToTaskRequest(id=task_id), context=context()):
            steady_events.append(ev)

    steady_run = asyncio.create_task(follow_steadily())

    # The subscriber whose connection dies: its own channel, closed under the stream.
    fragile = client(card, streaming=True)
    before: list[StreamResponse] = []
    try:
        async for ev in fragile.subscribe(SubscribeToTaskRequest(id=task_id), context=context()):
            before.append(ev)
            if generation(ev) >= CUT_AT:
                break
    finally:
        await fragile.close()  # kills the connection mid-task
    expect(before and before[0].HasField('task'), 'the first subscription starts with the Task')
    last = generation(before[-1])
    expect(last >= CUT_AT, f'generations arrive over gRPC (last seen {last})')

    # Resume on a new connection with the last generation seen.
    resumed_client = client(card, streaming=True)
    after: list[StreamResponse] = []
    stream = resumed_client.subscribe(
        SubscribeToTaskRequest(id=task_id), context=context(**{'A2A-Last-Generation': str(last)})
    )

    async def drain() -> None:
        async for ev in stream:
            after.append(ev)

    await asyncio.wait_for(drain(), LIMIT)
    await resumed_client.close()
    await asyncio.wait_for(steady_run, LIMIT)
    await steady.close()

    expect(after, 'the resumed stream has events')
    expect(not after[0].HasField('task'), 'a resumed stream starts without a Task snapshot')
    gens = [generation(ev) for ev in after]
    expect(gens == list(range(last + 1, last + 1 + len(after))), f'generations {gens} follow {last} without a gap')
    final = after[-1]
    expect(
        final.HasField('status_update') and final.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
        'the resumed stream ends COMPLETED',
    )
    # Nothing missing, nothing repeated: the chunks of the snapshot, the cut stream and the rest.
    snapshot = before[0].task
    texts = [p.text for a in snapshot.artifacts for p in a.parts]
    texts += [t for t in map(chunk_text, before[1:] + after) if t is not None]
    expect(texts == [f'chunk {i}' for i in range(TOTAL)], f'joined chunks {texts}')
    # And exactly what the uninterrupted subscriber saw after the cut.
    steady_after = [ev for ev in steady_events if not ev.HasField('task') and generation(ev) > last]
    expect(
        [ev.SerializeToString() for ev in steady_after] == [ev.SerializeToString() for ev in after],
        'the resumed events equal the uninterrupted subscriber\'s, byte for byte',
    )


CHECKS = [
    ('the card declares the resume extension', check_card),
    ('a stream cut mid-task resumes after its last generation, nothing missing', check_cut_and_resume),
]


async def main(base_url: str) -> int:
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    passed = failed = 0
    for name, check in CHECKS:
        try:
            await asyncio.wait_for(check(card), LIMIT * 2)
            print(f'ok - [GRPC] {name}', flush=True)
            passed += 1
        except Exception as e:  # noqa: BLE001 - report anything
            print(f'FAIL - [GRPC] {name}: {type(e).__name__}: {e}', flush=True)
            failed += 1
    print(f'{passed} passed, {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        print(f'usage: {sys.argv[0]} BASE_URL', file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip('/'))))
