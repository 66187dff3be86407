#!/usr/bin/env python3
"""Self-test target for the interop suite: the demo agent on the official SDK server.

Not used by run.sh. It serves the same demo-agent commands as our server
(``stream N MS``, ``input``, ``message TEXT``, echo) with a2a-sdk's own gRPC
server stack (GrpcHandler + DefaultRequestHandler), plus grpc health and
v1alpha reflection, so the checks themselves can be validated against the
reference implementation:

    target/interop-venv/bin/python tests/interop/sdk_reference_server.py --listen 127.0.0.1:50051 &
    target/interop-venv/bin/python tests/interop/reflection_check.py 127.0.0.1:50051
    target/interop-venv/bin/python tests/interop/grpc_interop.py 127.0.0.1:50051
"""

import argparse
import asyncio
import uuid

import grpc

from grpc_health.v1 import _async as health_async
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
    a2a_pb2,
    a2a_pb2_grpc,
)


A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name['A2AService'].full_name


class DemoExecutor(AgentExecutor):
    async def execute(self, context, event_queue):
        text = context.get_user_input()
        if text.startswith('message '):
            await event_queue.enqueue_event(
                new_text_message(text[len('message '):], context_id=context.context_id)
            )
            return
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await up.add_artifact([Part(text=text)])
            await up.complete()
            return
        if text == 'input':
            await up.requires_input(
                new_text_message(
                    'What should I echo back?',
                    task_id=task.id,
                    context_id=task.context_id,
                )
            )
            return
        if text.startswith('stream '):
            _, n, ms = text.split()
            n = int(n)
            await up.start_work()
            artifact_id = str(uuid.uuid4())
            for i in range(n):
                await up.add_artifact(
                    [Part(text=f'chunk {i}')],
                    artifact_id=artifact_id,
                    append=i > 0,
                    last_chunk=i == n - 1,
                )
                await asyncio.sleep(int(ms) / 1000)
            await up.complete()
            return
        await up.add_artifact([Part(text=text)])
        await up.complete()

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def serve(listen: str) -> None:
    card = AgentCard(
        name='sdk-reference-demo',
        description='a2a-sdk reference server running the demo agent',
        version='0.0.0',
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[
            AgentInterface(url=listen, protocol_binding='GRPC', protocol_version='1.0')
        ],
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id='demo', name='demo', description='demo commands', tags=['demo'])],
    )
    handler = DefaultRequestHandler(
        agent_executor=DemoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    health = health_async.HealthServicer()
    await health.set('', health_pb2.HealthCheckResponse.SERVING)
    await health.set(A2A_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        [A2A_SERVICE, 'grpc.health.v1.Health', reflection.SERVICE_NAME], server
    )
    server.add_insecure_port(listen)
    await server.start()
    print(f'sdk reference server listening on {listen}', flush=True)
    await server.wait_for_termination()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--listen', default='127.0.0.1:50051')
    asyncio.run(serve(parser.parse_args().listen))
