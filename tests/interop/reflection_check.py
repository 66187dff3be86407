#!/usr/bin/env python3
"""gRPC reflection and health checks against an A2A v1.0 server.

Usage: reflection_check.py HOST:PORT

Uses the grpcio-reflection v1alpha client (ProtoReflectionDescriptorDatabase) to
list the server's services and resolve the A2A service, compares what the server
reflects with the wire contract embedded in the official SDK (a2a-sdk's
a2a_pb2), and calls grpc.health.v1.Health/Check.

Output: one line per check, ``ok - <name>`` or ``FAIL - <name>: <reason>``, then
``N passed, M failed``. Exit status is non-zero if any check failed.
"""

from __future__ import annotations

import sys

from collections.abc import Callable

import grpc

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from a2a.types import a2a_pb2


A2A_SERVICE = 'lf.a2a.v1.A2AService'
HEALTH_SERVICE = 'grpc.health.v1.Health'
A2A_METHODS = [
    'SendMessage',
    'SendStreamingMessage',
    'GetTask',
    'ListTasks',
    'CancelTask',
    'SubscribeToTask',
    'CreateTaskPushNotificationConfig',
    'GetTaskPushNotificationConfig',
    'ListTaskPushNotificationConfigs',
    'GetExtendedAgentCard',
    'DeleteTaskPushNotificationConfig',
]
RPC_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0


class CheckFailed(Exception):
    """A check's expectation did not hold."""


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


class Checks:
    def __init__(self, channel: grpc.Channel):
        self.channel = channel
        self.db = ProtoReflectionDescriptorDatabase(channel)
        self.pool = DescriptorPool(self.db)

    # -- reflection ---------------------------------------------------------

    def services_listed(self) -> None:
        services = list(self.db.get_services())
        for name in (A2A_SERVICE, HEALTH_SERVICE):
            expect(name in services, f'{name} not listed; services: {services}')

    def a2a_methods(self) -> None:
        try:
            svc = self.pool.FindServiceByName(A2A_SERVICE)
        except KeyError as e:
            raise CheckFailed(f'cannot resolve {A2A_SERVICE} via reflection: {e}') from None
        got = [m.name for m in svc.methods]
        expect(
            sorted(got) == sorted(A2A_METHODS),
            f'methods {got}; missing {sorted(set(A2A_METHODS) - set(got))}, '
            f'unexpected {sorted(set(got) - set(A2A_METHODS))}',
        )
        expect(len(got) == 11, f'{len(got)} methods (duplicates?): {got}')

    def a2a_signatures_match_sdk(self) -> None:
        """Each method's request/response types and streaming flags match the SDK."""
        svc = self.pool.FindServiceByName(A2A_SERVICE)
        sdk = a2a_pb2.DESCRIPTOR.services_by_name['A2AService']
        problems = []
        for want in sdk.methods:
            m = svc.methods_by_name.get(want.name)
            if m is None:
                problems.append(f'{want.name}: missing')
                continue
            got_sig = (
                m.input_type.full_name,
                m.output_type.full_name,
                m.client_streaming,
                m.server_streaming,
            )
            want_sig = (
                want.input_type.full_name,
                want.output_type.full_name,
                want.client_streaming,
                want.server_streaming,
            )
            if got_sig != want_sig:
                problems.append(f'{want.name}: server {got_sig}, SDK {want_sig}')
        expect(not problems, '; '.join(problems))

    def a2a_messages_match_sdk(self) -> None:
        """Every message/enum of the SDK's a2a.proto has the same wire shape on the server.

        The only fields the server may add are a2aproject/A2A dev-1.1's (PR #1810), exactly
        as that branch numbers and types them (int64; `optional` on the two request fields).
        """
        problems: list[str] = []
        int64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
        optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        dev_1_1 = {
            'lf.a2a.v1.Task.generation': (7, optional, int64, '', 'generation', False, ''),
            'lf.a2a.v1.TaskStatusUpdateEvent.generation': (5, optional, int64, '', 'generation', False, ''),
            'lf.a2a.v1.TaskArtifactUpdateEvent.generation': (7, optional, int64, '', 'generation', False, ''),
            'lf.a2a.v1.GetTaskRequest.current_generation': (
                4, optional, int64, '', 'currentGeneration', True, ''),
            'lf.a2a.v1.SendMessageConfiguration.if_generation_match': (
                5, optional, int64, '', 'ifGenerationMatch', True, ''),
        }

        def field_sig(
            f: descriptor_pb2.FieldDescriptorProto, oneofs: list[str], live
        ) -> tuple:
            oneof = ''
            if f.HasField('oneof_index') and not f.proto3_optional:
                oneof = oneofs[f.oneof_index]
            return (
                f.number,
                f.label,
                f.type,
                f.type_name.lstrip('.'),
                # computed by the descriptor (explicit json_name or lowerCamelCase)
                live.fields_by_name[f.name].json_name,
                f.proto3_optional,
                oneof,
            )

        def compare_message(sdk_desc) -> None:
            name = sdk_desc.full_name
            try:
                srv_desc = self.pool.FindMessageTypeByName(name)
            except KeyError:
                problems.append(f'message {name}: not found')
                return
            a, b = descriptor_pb2.DescriptorProto(), descriptor_pb2.DescriptorProto()
            sdk_desc.CopyToProto(a)
            srv_desc.CopyToProto(b)
            a_oneofs = [o.name for o in a.oneof_decl]
            b_oneofs = [o.name for o in b.oneof_decl]
            a_fields = {f.name: field_sig(f, a_oneofs, sdk_desc) for f in a.field}
            b_fields = {f.name: field_sig(f, b_oneofs, srv_desc) for f in b.field}
            for fname in sorted(set(a_fields) | set(b_fields)):
                added = fname not in a_fields and dev_1_1.get(f'{name}.{fname}') == b_fields.get(fname)
                if a_fields.get(fname) != b_fields.get(fname) and not added:
                    problems.append(
                        f'{name}.{fname}: server {b_fields.get(fname)}, '
                        f'SDK {a_fields.get(fname)} '
                        '(number,label,type,type_name,json_name,proto3_optional,oneof)'
                    )
            for nested in sdk_desc.nested_types:
                if not nested.GetOptions().map_entry:
                    compare_message(nested)
            for enum in sdk_desc.enum_types:
                compare_enum(enum)

        def compare_enum(sdk_enum) -> None:
            name = sdk_enum.full_name
            try:
                srv_enum = self.pool.FindEnumTypeByName(name)
            except KeyError:
                problems.append(f'enum {name}: not found')
                return
            a = {v.name: v.number for v in sdk_enum.values}
            b = {v.name: v.number for v in srv_enum.values}
            if a != b:
                problems.append(f'enum {name}: server {b}, SDK {a}')

        for msg in a2a_pb2.DESCRIPTOR.message_types_by_name.values():
            compare_message(msg)
        for enum in a2a_pb2.DESCRIPTOR.enum_types_by_name.values():
            compare_enum(enum)
        expect(not problems, f'{len(problems)} differences: ' + '; '.join(problems[:20]))

    # -- health -------------------------------------------------------------

    def _health(self, service: str) -> None:
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            resp = stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT
            )
        except grpc.RpcError as e:
            raise CheckFailed(
                f'Check(service={service!r}) failed: gRPC {e.code().name}: {e.details()!r}'
            ) from None
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
        expect(
            resp.status == health_pb2.HealthCheckResponse.SERVING,
            f'Check(service={service!r}) status {status}, expected SERVING',
        )

    def health_overall(self) -> None:
        self._health('')

    def health_a2a(self) -> None:
        self._health(A2A_SERVICE)


def run(name: str, fn: Callable[[], None]) -> bool:
    try:
        fn()
    except CheckFailed as e:
        print(f'FAIL - {name}: {e}', flush=True)
        return False
    except grpc.RpcError as e:
        print(f'FAIL - {name}: gRPC {e.code().name}: {e.details()!r}', flush=True)
        return False
    except Exception as e:  # noqa: BLE001 - report anything
        print(f'FAIL - {name}: {type(e).__name__}: {e}', flush=True)
        return False
    print(f'ok - {name}', flush=True)
    return True


def main(addr: str) -> int:
    with grpc.insecure_channel(addr) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT)
        except grpc.FutureTimeoutError:
            print(
                f'FAIL - connect: no gRPC connection to {addr} within {CONNECT_TIMEOUT:.0f}s',
                flush=True,
            )
            print('0 passed, 1 failed', flush=True)
            return 1
        c = Checks(channel)
        results = [
            run(f'reflection lists {A2A_SERVICE} and {HEALTH_SERVICE}', c.services_listed),
            run(f'{A2A_SERVICE} resolves with its 11 methods', c.a2a_methods),
            run('method signatures match the SDK', c.a2a_signatures_match_sdk),
            run('reflected messages/enums match the SDK wire contract', c.a2a_messages_match_sdk),
            run("health Check(service='') is SERVING", c.health_overall),
            run(f'health Check(service={A2A_SERVICE!r}) is SERVING', c.health_a2a),
        ]
    passed = sum(results)
    failed = len(results) - passed
    print(f'{passed} passed, {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        print(f'usage: {sys.argv[0]} HOST:PORT', file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
