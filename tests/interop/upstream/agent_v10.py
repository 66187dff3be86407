"""Upstream test agent for the A2A v1.0 protocol, built on a2a-sdk 1.x.

The Rust `--agent a2a --upstream URL` tests relay tasks to this agent. Usage:

    python agent_v10.py --port P [--no-streaming]

Serves JSON-RPC at `/`, HTTP+JSON (REST) under `/rest` and the agent card at
`/.well-known/agent-card.json`, then prints `READY <port>`. The first word of the
user message picks the behaviour (echo, stream N MS, ask, slow, reply, fail); see
tests/interop/upstream/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from starlette.applications import Starlette

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

from common import (
    ASK_AGAIN_QUESTION,
    ASK_QUESTION,
    SLOW_LIMIT_S,
    bind,
    parse_args,
    parse_command,
    serve,
)

REST_PREFIX = '/rest'


def build_card(port: int, streaming: bool) -> AgentCard:
    base = f'http://127.0.0.1:{port}'
    return AgentCard(
        name='upstream-v10',
        description='Upstream A2A v1.0 test agent (a2a-sdk 1.x) for relay tests.',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(
                url=f'{base}/', protocol_binding='JSONRPC', protocol_version='1.0'
            ),
            AgentInterface(
                url=f'{base}{REST_PREFIX}',
                protocol_binding='HTTP+JSON',
                protocol_version='1.0',
            ),
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            AgentSkill(
                id='relay-echo',
                name='Echo',
                description='Echoes the message text back as an artifact.',
                tags=['echo', 'test'],
            ),
            AgentSkill(
                id='relay-stream',
                name='Stream',
                description='`stream N MS`: N artifact chunks, MS milliseconds apart.',
                tags=['stream', 'test'],
            ),
        ],
    )


def text_part(text: str) -> Part:
    return Part(text=text)


class UpstreamExecutor(AgentExecutor):
    def __init__(self) -> None:
        # Set by cancel(), polled by long-running work: stopping does not rely on
        # the framework cancelling the execute() coroutine.
        self._cancelled: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task

        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            await self._answer(updater, text)
            return

        command = parse_command(text)
        if command.kind == 'reply':
            # Message-only interaction: no Task may be enqueued before or after it.
            await event_queue.enqueue_event(
                Message(
                    role=Role.ROLE_AGENT,
                    message_id=str(uuid.uuid4()),
                    context_id=context.context_id,
                    parts=[text_part('pong')],
                )
            )
            return

        task_id, context_id = context.task_id, context.context_id
        if task is None:
            # The v2 handler refuses status updates for a task it has not seen yet.
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        cancelled = self._cancelled.setdefault(task_id, asyncio.Event())
        try:
            await self._run(command, updater, text, cancelled)
        finally:
            self._cancelled.pop(task_id, None)

    async def _run(self, command, updater: TaskUpdater, text: str, cancelled: asyncio.Event) -> None:
        def say(words: str) -> Message:
            return updater.new_agent_message([text_part(words)])

        if command.kind == 'stream':
            await updater.start_work(say('streaming'))
            for i in range(command.count):
                if i > 0 and command.delay_ms:
                    await asyncio.sleep(command.delay_ms / 1000)
                if cancelled.is_set():
                    return
                await updater.add_artifact(
                    [text_part(f'chunk {i}')],
                    artifact_id='out',
                    name='out',
                    append=i > 0,
                    last_chunk=i == command.count - 1,
                )
            await updater.complete(say('done'))
        elif command.kind == 'ask':
            await updater.start_work()
            await updater.requires_input(say(ASK_QUESTION))
        elif command.kind == 'slow':
            await updater.start_work(say('working slowly'))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancelled.wait(), SLOW_LIMIT_S)
            if not cancelled.is_set():
                await updater.complete()
        elif command.kind == 'fail':
            await updater.start_work()
            await updater.failed(say('upstream says no'))
        else:
            await updater.start_work()
            await updater.add_artifact([text_part(text)], artifact_id='echo', name='echo')
            await updater.complete()

    async def _answer(self, updater: TaskUpdater, text: str) -> None:
        """Second turn of `ask`: `again` asks once more, anything else is the city."""
        if text.strip() == 'again':
            await updater.requires_input(
                updater.new_agent_message([text_part(ASK_AGAIN_QUESTION)])
            )
            return
        await updater.add_artifact(
            [text_part(f'city: {text}')], artifact_id='answer', name='answer'
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The handler calls this before cancelling execute(); the CANCELED status
        # written here is what the task store and live subscribers see.
        if (flag := self._cancelled.get(context.task_id)) is not None:
            flag.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_app(card: AgentCard) -> Starlette:
    handler = DefaultRequestHandler(
        agent_executor=UpstreamExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        # Drain running tasks so shutdown leaves no pending asyncio work.
        await handler.aclose()

    # Card and JSON-RPC first: the REST routes end with a catch-all `/{tenant}` mount.
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url='/'),
        *create_rest_routes(handler, path_prefix=REST_PREFIX),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    args = parse_args('A2A v1.0 upstream test agent (a2a-sdk 1.x)')
    sock, port = bind(args.port)
    card = build_card(port, streaming=not args.no_streaming)
    serve(build_app(card), sock, port)


if __name__ == '__main__':
    main()
