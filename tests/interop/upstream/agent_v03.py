"""Upstream test agent for the A2A v0.3 protocol, built on a2a-sdk 0.3.

The Rust `--agent a2a --upstream URL` tests relay tasks to this agent. Usage:

    python agent_v03.py --port P [--no-streaming]

Serves JSON-RPC at `/` and the agent card at `/.well-known/agent-card.json`, then
prints `READY <port>`. Behaviour matches agent_v10.py; see README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
    TransportProtocol,
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


def build_card(port: int, streaming: bool) -> AgentCard:
    return AgentCard(
        name='upstream-v03',
        description='Upstream A2A v0.3 test agent (a2a-sdk 0.3) for relay tests.',
        version='0.3.0',
        url=f'http://127.0.0.1:{port}/',
        preferred_transport=TransportProtocol.jsonrpc,
        protocol_version='0.3.0',
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
    return Part(root=TextPart(text=text))


class UpstreamExecutor(AgentExecutor):
    def __init__(self) -> None:
        # Set by cancel(), polled by long-running work: stopping does not rely on
        # the framework cancelling the execute() coroutine.
        self._cancelled: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task

        if task is not None and task.status.state == TaskState.input_required:
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            await self._answer(updater, text)
            return

        command = parse_command(text)
        if command.kind == 'reply':
            await event_queue.enqueue_event(
                Message(
                    role=Role.agent,
                    message_id=str(uuid.uuid4()),
                    context_id=context.context_id,
                    parts=[text_part('pong')],
                )
            )
            return

        task_id, context_id = context.task_id, context.context_id
        if task is None:
            # Announce the task first, so streaming clients open with a Task snapshot.
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.submitted),
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
            # final=True: v0.3 consumers stop at a final event, and this turn is over.
            await updater.requires_input(say(ASK_QUESTION), final=True)
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
                updater.new_agent_message([text_part(ASK_AGAIN_QUESTION)]), final=True
            )
            return
        await updater.add_artifact(
            [text_part(f'city: {text}')], artifact_id='answer', name='answer'
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The handler taps the task's queue and waits for a final CANCELED event on
        # it, then cancels the running execute().
        if (flag := self._cancelled.get(context.task_id)) is not None:
            flag.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def main() -> None:
    args = parse_args('A2A v0.3 upstream test agent (a2a-sdk 0.3)')
    sock, port = bind(args.port)
    card = build_card(port, streaming=not args.no_streaming)
    handler = DefaultRequestHandler(
        agent_executor=UpstreamExecutor(), task_store=InMemoryTaskStore()
    )
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    serve(app, sock, port)


if __name__ == '__main__':
    main()
