#!/usr/bin/env python3
"""Interop checks for A2A v0.3 clients: the official Python SDK ``a2a-sdk==0.3.26``.

Usage: py_interop.py BINDING BASE_URL     (BINDING: JSONRPC, HTTP+JSON or GRPC)

The client is built as a v0.3 application builds it: ``A2ACardResolver`` reads
``BASE_URL/.well-known/agent-card.json`` (sent without ``A2A-Version``, as v0.3 clients do, so
the server answers with the card carrying the v0.3 fields), and ``ClientFactory``, limited to
BINDING, picks that transport from the card's ``url``/``additionalInterfaces``. Every check
goes through the SDK's ``Client``, except push config list/delete, which the 0.3 ``Client``
does not offer: those are sent with the SDK's own request types (JSON-RPC models, the v0.3
proto messages for REST and gRPC) and the answers parsed strictly with them.

Output: ``ok - [v0.3 py BINDING] <name>`` or ``FAIL - …: <reason>`` per check, then
``N passed, M failed``. Exit status is non-zero if any check failed.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
import uuid

import grpc
import httpx

from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.grpc import a2a_pb2, a2a_pb2_grpc
from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    DeleteTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigResponse,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    TransportProtocol,
)

BINDING = sys.argv[1] if len(sys.argv) == 3 else ''
TAG = f'[v0.3 py {BINDING}]'
TRANSPORTS = {
    'JSONRPC': TransportProtocol.jsonrpc,
    'HTTP+JSON': TransportProtocol.http_json,
    'GRPC': TransportProtocol.grpc,
}
# How each binding reports the errors checked: JSON-RPC code, HTTP status, gRPC status.
ERRORS = {
    'JSONRPC': {'not_found': -32001, 'not_cancelable': -32002, 'unsupported': -32004},
    'HTTP+JSON': {'not_found': 404, 'not_cancelable': 400, 'unsupported': 400},
    'GRPC': {
        'not_found': grpc.StatusCode.NOT_FOUND,
        'not_cancelable': grpc.StatusCode.FAILED_PRECONDITION,
        'unsupported': grpc.StatusCode.FAILED_PRECONDITION,
    },
}
results: list[bool] = []


def message(text: str, task: Task | None = None) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


class Env:
    def __init__(self, base_url: str, http: httpx.AsyncClient):
        self.base_url = base_url
        self.http = http
        self.card = None

    async def client(self, streaming: bool = True, polling: bool = False):
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=self.http,
            supported_transports=[TRANSPORTS[BINDING]],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        return ClientFactory(config).create(self.card)

    def url(self) -> str:
        """The URL the card gives for BINDING."""
        return next(i.url for i in self.card.additional_interfaces if i.transport == BINDING)

    async def rpc(self, request, response_type):
        """Posts one of the SDK's typed JSON-RPC requests; validates the answer with its model."""
        answer = await self.http.post(self.url(), json=request.model_dump(mode='json', exclude_none=True))
        answer.raise_for_status()
        return response_type.model_validate(answer.json()).root

    async def list_configs(self, task_id: str) -> list[str]:
        """The config ids of a task's push configs, through BINDING."""
        if BINDING == 'JSONRPC':
            listed = await self.rpc(
                ListTaskPushNotificationConfigRequest(id='l', params=ListTaskPushNotificationConfigParams(id=task_id)),
                ListTaskPushNotificationConfigResponse,
            )
            return [c.push_notification_config.id for c in listed.result]
        if BINDING == 'HTTP+JSON':
            answer = await self.http.get(f'{self.url()}/v1/tasks/{task_id}/pushNotificationConfigs')
            answer.raise_for_status()
            listed = json_format.ParseDict(answer.json(), a2a_pb2.ListTaskPushNotificationConfigResponse())
        else:
            async with grpc.aio.insecure_channel(self.url()) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                listed = await stub.ListTaskPushNotificationConfig(
                    a2a_pb2.ListTaskPushNotificationConfigRequest(parent=f'tasks/{task_id}')
                )
        return [c.push_notification_config.id for c in listed.configs]

    async def delete_config(self, task_id: str, config_id: str) -> None:
        """Deletes a push config through BINDING."""
        if BINDING == 'JSONRPC':
            deleted = await self.rpc(
                DeleteTaskPushNotificationConfigRequest(
                    id='d', params=DeleteTaskPushNotificationConfigParams(id=task_id, push_notification_config_id=config_id)
                ),
                DeleteTaskPushNotificationConfigResponse,
            )
            assert deleted.result is None, deleted
        elif BINDING == 'HTTP+JSON':
            answer = await self.http.delete(f'{self.url()}/v1/tasks/{task_id}/pushNotificationConfigs/{config_id}')
            answer.raise_for_status()
        else:
            async with grpc.aio.insecure_channel(self.url()) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                name = f'tasks/{task_id}/pushNotificationConfigs/{config_id}'
                await stub.DeleteTaskPushNotificationConfig(a2a_pb2.DeleteTaskPushNotificationConfigRequest(name=name))


async def events_of(stream) -> list:
    """Every item of a ``send_message`` / ``resubscribe`` stream."""
    return [item async for item in stream]


def final_task(items: list) -> Task:
    last = items[-1]
    assert isinstance(last, tuple), f'expected (Task, update), got {last!r}'
    return last[0]


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


def expect_code(error: Exception, kind: str) -> None:
    """Asserts that `error` is the `kind` of A2A error, as BINDING reports it."""
    expected = ERRORS[BINDING][kind]
    if isinstance(error, A2AClientJSONRPCError):
        got = error.error.code
    elif isinstance(error, A2AClientHTTPError):
        got = error.status_code
    elif isinstance(error, grpc.aio.AioRpcError):
        got = error.code()
    else:
        raise AssertionError(f'expected a {kind} error, got {error!r}')
    assert got == expected, f'expected {kind} ({expected}), got {got}: {error}'


async def main(base_url: str) -> int:
    if BINDING not in TRANSPORTS:
        print(__doc__, file=sys.stderr)
        return 2
    async with httpx.AsyncClient(timeout=30) as http:
        env = Env(base_url, http)

        async def card():
            env.card = await A2ACardResolver(http, base_url).get_agent_card()
            assert env.card.url, 'the card has a url'
            transports = [i.transport for i in env.card.additional_interfaces or []]
            assert BINDING in transports, transports
            assert env.card.preferred_transport == 'JSONRPC', env.card.preferred_transport
            assert env.card.protocol_version.startswith('0.3'), env.card.protocol_version
            assert env.card.capabilities.streaming

        await check('card: the SDK resolver reads url/preferredTransport/protocolVersion', card)
        if env.card is None:
            print(f'{sum(results)} passed, {len(results) - sum(results)} failed')
            return 1

        async def send_blocking():
            client = await env.client(streaming=False)
            items = await events_of(client.send_message(message('hello')))
            task = final_task(items)
            assert task.status.state == TaskState.completed, task.status.state
            assert task.artifacts and task.artifacts[0].parts, task

        async def send_message_reply():
            client = await env.client(streaming=False)
            items = await events_of(client.send_message(message('message hi')))
            assert isinstance(items[-1], Message), items[-1]
            assert items[-1].parts[0].root.text, items[-1]

        async def stream():
            client = await env.client()
            items = await events_of(client.send_message(message('stream 3 20')))
            first, _ = items[0]
            assert isinstance(first, Task)
            updates = [u for _, u in items if u is not None]
            chunks = [u for u in updates if isinstance(u, TaskArtifactUpdateEvent)]
            statuses = [u for u in updates if isinstance(u, TaskStatusUpdateEvent)]
            assert len(chunks) == 3, updates
            assert statuses[-1].final and statuses[-1].status.state == TaskState.completed, statuses[-1]

        async def resubscribe_mid_stream():
            starter = await env.client(streaming=False, polling=True)
            items = await events_of(starter.send_message(message('stream 6 150')))
            started = final_task(items)
            assert started.status.state != TaskState.completed, 'non-blocking send returns early'
            await asyncio.sleep(0.35)
            client = await env.client()
            # The SDK hands out one Task it keeps updating, so the snapshot is read as it arrives.
            events, first = [], None
            async for task, update in client.resubscribe(TaskIdParams(id=started.id)):
                if first is None:
                    first = (update, task.status.state, len(task.artifacts[0].parts) if task.artifacts else 0)
                events.append((task, update))
            first_update, first_state, in_snapshot = first
            assert first_update is None and first_state == TaskState.working, first
            streamed = [u for _, u in events if isinstance(u, TaskArtifactUpdateEvent)]
            assert in_snapshot + len(streamed) == 6, f'{in_snapshot} in the snapshot + {len(streamed)} streamed'
            last = events[-1][1]
            assert isinstance(last, TaskStatusUpdateEvent) and last.final, last

        async def get():
            client = await env.client(streaming=False)
            task = final_task(await events_of(client.send_message(message('hello'))))
            got = await client.get_task(TaskQueryParams(id=task.id, history_length=1))
            assert got.id == task.id and got.status.state == TaskState.completed
            assert got.history is not None and len(got.history) <= 1, got.history

        async def cancel():
            client = await env.client(streaming=False)
            task = final_task(await events_of(client.send_message(message('input'))))
            assert task.status.state == TaskState.input_required, task.status.state
            canceled = await client.cancel_task(TaskIdParams(id=task.id))
            assert canceled.status.state == TaskState.canceled, canceled.status.state

        async def multi_turn():
            client = await env.client(streaming=False)
            task = final_task(await events_of(client.send_message(message('input'))))
            done = final_task(await events_of(client.send_message(message('hello', task))))
            assert done.id == task.id and done.status.state == TaskState.completed

        async def push_configs():
            client = await env.client(streaming=False)
            task = final_task(await events_of(client.send_message(message('input'))))
            config = TaskPushNotificationConfig(
                task_id=task.id,
                push_notification_config=PushNotificationConfig(id='p1', url='http://127.0.0.1:9/hook', token='t'),
            )
            saved = await client.set_task_callback(config)
            assert saved.push_notification_config.id == 'p1', saved
            got = await client.get_task_callback(
                GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id='p1')
            )
            assert got.push_notification_config.url == 'http://127.0.0.1:9/hook', got
            listed = await env.list_configs(task.id)
            assert listed == ['p1'], listed
            await env.delete_config(task.id, 'p1')
            try:
                await client.get_task_callback(
                    GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id='p1')
                )
            except Exception as error:  # noqa: BLE001
                expect_code(error, 'not_found')
            else:
                raise AssertionError('a deleted config is gone')

        async def unknown_task():
            client = await env.client(streaming=False)
            for call in (
                lambda: client.get_task(TaskQueryParams(id='no-such-task')),
                lambda: client.cancel_task(TaskIdParams(id='no-such-task')),
            ):
                try:
                    await call()
                except Exception as error:  # noqa: BLE001
                    expect_code(error, 'not_found')
                else:
                    raise AssertionError('an unknown task is an error')

        async def terminal_task():
            client = await env.client()
            task = final_task(await events_of(client.send_message(message('hello'))))
            try:
                await client.cancel_task(TaskIdParams(id=task.id))
            except Exception as error:  # noqa: BLE001
                expect_code(error, 'not_cancelable')
            else:
                raise AssertionError('canceling a completed task is an error')
            try:
                await events_of(client.resubscribe(TaskIdParams(id=task.id)))
            except Exception as error:  # noqa: BLE001
                expect_code(error, 'unsupported')
            else:
                raise AssertionError('resubscribing to a completed task is an error')

        await check('message/send (blocking) returns the completed Task', send_blocking)
        await check('message/send answered by a Message', send_message_reply)
        await check('message/stream: Task first, 3 chunks, final status', stream)
        await check('tasks/resubscribe mid-stream: snapshot first, no gap, final', resubscribe_mid_stream)
        await check('tasks/get with historyLength', get)
        await check('tasks/cancel an input-required task', cancel)
        await check('multi-turn: a second message continues the task', multi_turn)
        await check('tasks/pushNotificationConfig set/get/list/delete', push_configs)
        await check('unknown task: get and cancel give -32001', unknown_task)
        await check('terminal task: cancel -32002, resubscribe -32004', terminal_task)

    passed = sum(results)
    print(f'{passed} passed, {len(results) - passed} failed')
    return 0 if passed == len(results) else 1


if __name__ == '__main__':
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[2])))
