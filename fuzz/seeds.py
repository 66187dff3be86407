#!/usr/bin/env python3
"""Writes the hand-made seed corpus of every fuzz target to fuzz/corpus/<target>/seed-*.

Valid requests of every kind for each binding (v1.0 and v0.3), plus a few near misses, kept
small. Run from anywhere; it only (re)writes files named seed-*, so the grown corpus beside
them stays. The input formats are described at the top of each fuzz_targets/<target>.rs.
"""
import base64
import hashlib
import hmac
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, "seed-" + name), "wb") as f:
        f.write(data)


def j(value):
    return json.dumps(value, separators=(",", ":"))


# --- JSON bodies -------------------------------------------------------------------------

MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
RICH_MESSAGE = {
    "messageId": "m2", "contextId": "c1", "role": "ROLE_USER",
    "parts": [
        {"text": "hi", "metadata": {"k": "v"}},
        {"raw": "AQID", "filename": "a.bin", "mediaType": "application/octet-stream"},
        {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"},
        {"data": {"n": 1.5, "list": [True, None, "x"], "nested": {"a": -1e300}}},
    ],
    "metadata": {"trace": "abc"}, "extensions": ["https://example.com/ext"],
}
PUSH = {"url": "https://example.com/hook", "token": "t", "authentication": {"scheme": "Bearer", "credentials": "c"}}
SEND = {"message": MESSAGE}
SEND_RICH = {
    "tenant": "acme", "message": RICH_MESSAGE,
    "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2, "returnImmediately": False,
                      "ifGenerationMatch": "3", "taskPushNotificationConfig": PUSH},
    "metadata": {"a": 1},
}
V1_PARAMS = {
    "SendMessage": [SEND, SEND_RICH],
    "SendStreamingMessage": [SEND],
    "GetTask": [{"id": "t1", "historyLength": 1}, {"id": "t1", "currentGeneration": "2"}],
    "ListTasks": [{"contextId": "c1", "status": "TASK_STATE_WORKING", "pageSize": 5, "pageToken": "",
                   "historyLength": 0, "statusTimestampAfter": "2026-01-01T00:00:00Z", "includeArtifacts": True},
                  {"status": "TASK_STATE_NOPE"}],
    "CancelTask": [{"id": "t1", "metadata": {"why": "done"}}],
    "SubscribeToTask": [{"id": "t1"}],
    "CreateTaskPushNotificationConfig": [dict(PUSH, taskId="t1", id="p1")],
    "GetTaskPushNotificationConfig": [{"taskId": "t1", "id": "p1"}],
    "ListTaskPushNotificationConfigs": [{"taskId": "t1", "pageSize": 2, "pageToken": "x"}],
    "DeleteTaskPushNotificationConfig": [{"taskId": "t1", "id": "p1"}],
    "GetExtendedAgentCard": [{}],
}
V03_MESSAGE = {"kind": "message", "messageId": "m3", "role": "user",
               "parts": [{"kind": "text", "text": "hello"},
                         {"kind": "file", "file": {"uri": "https://example.com/f", "mimeType": "text/plain", "name": "f"}},
                         {"kind": "file", "file": {"bytes": "AQID"}},
                         {"kind": "data", "data": {"x": 1}}]}
V03_PARAMS = {
    "message/send": {"message": V03_MESSAGE, "configuration": {"blocking": True, "historyLength": 1,
                                                               "acceptedOutputModes": ["text/plain"]}},
    "message/stream": {"message": V03_MESSAGE},
    "tasks/get": {"id": "t1", "historyLength": 0},
    "tasks/cancel": {"id": "t1"},
    "tasks/resubscribe": {"id": "t1"},
    "tasks/pushNotificationConfig/set": {"taskId": "t1", "pushNotificationConfig": {
        "id": "p1", "url": "https://example.com/hook", "token": "t",
        "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
    "tasks/pushNotificationConfig/get": {"id": "t1", "pushNotificationConfigId": "p1"},
    "tasks/pushNotificationConfig/list": {"id": "t1"},
    "tasks/pushNotificationConfig/delete": {"id": "t1", "pushNotificationConfigId": "p1"},
    "agent/getAuthenticatedExtendedCard": {},
}


def rpc(method, params, id=1):
    return j({"jsonrpc": "2.0", "id": id, "method": method, "params": params})


def jsonrpc_seeds():
    for method, variants in V1_PARAMS.items():
        for i, params in enumerate(variants):
            write("jsonrpc", f"{method}-{i}", rpc(method, params, id=i if i else "a"))
    for method, params in V03_PARAMS.items():
        write("jsonrpc", "v03-" + method.replace("/", "-"), rpc(method, params))
    write("jsonrpc", "batch", "[" + rpc("GetTask", {"id": "t"}) + "]")
    write("jsonrpc", "no-id", j({"jsonrpc": "2.0", "method": "GetTask", "params": {}}))
    write("jsonrpc", "big-id", '{"jsonrpc":"2.0","id":12345678901234567890,"method":"GetTask","params":{"id":"t"}}')
    write("jsonrpc", "old-version", j({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}))
    write("jsonrpc", "params-list", j({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]}))
    write("jsonrpc", "unknown", rpc("tasks/explode", {}))
    write("jsonrpc", "duplicate-keys", '{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"CancelTask","params":{"id":"t"}}')


# --- HTTP+JSON (rest target: "METHOD target\\nbody") -----------------------------------------

REST = [
    ("send", "POST /message:send", j(SEND)),
    ("send-rich", "POST /acme/message:send", j(SEND_RICH)),
    ("stream", "POST /message:stream", j(SEND)),
    ("list", "GET /tasks?contextId=c1&status=TASK_STATE_COMPLETED&pageSize=5&includeArtifacts=true"
             "&statusTimestampAfter=2026-01-01T00:00:00Z&historyLength=1", ""),
    ("list-tenant", "GET /acme/tasks?page_size=2&pageToken=abc", ""),
    ("get", "GET /tasks/t1?historyLength=2&currentGeneration=1", ""),
    ("get-encoded", "GET /t%2F1/tasks/a%3Ab%20c", ""),
    ("cancel", "POST /tasks/t1:cancel", j({"metadata": {"k": 1}})),
    ("subscribe", "GET /acme/tasks/t1:subscribe", ""),
    ("subscribe-post", "POST /tasks/a%3Ab:subscribe", ""),
    ("push-create", "POST /tasks/t1/pushNotificationConfigs", j(PUSH)),
    ("push-list", "GET /tasks/t1/pushNotificationConfigs?pageSize=3", ""),
    ("push-get", "GET /acme/tasks/t1/pushNotificationConfigs/p1", ""),
    ("push-delete", "DELETE /tasks/t1/pushNotificationConfigs/p1", ""),
    ("card", "GET /extendedAgentCard", ""),
    ("wrong-method", "PUT /message:send", ""),
    ("bad-query", "GET /tasks?pageSize=ten&status=1,2", ""),
]


def rest_seeds():
    for name, head, body in REST:
        write("rest", name, head + "\n" + body)


# --- ProtoJSON (first byte: the type) --------------------------------------------------------

CARD = {
    "name": "Fuzz agent", "description": "Cards to fuzz.", "version": "1.0.0",
    "provider": {"organization": "Example", "url": "https://example.com"},
    "documentationUrl": "https://example.com/docs", "iconUrl": "https://example.com/icon.png",
    "capabilities": {"streaming": True, "pushNotifications": False,
                     "extensions": [{"uri": "https://example.com/ext", "description": "x", "required": False,
                                     "params": {"a": 1}}]},
    "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                        "jwt": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}},
    "securityRequirements": [{"schemes": {"key": {"list": []}}}],
    "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain", "application/json"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["demo"], "examples": ["hi"],
                "inputModes": ["text/plain"], "outputModes": ["text/plain"]}],
    "supportedInterfaces": [{"url": "https://example.com", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
}
SKILL = CARD["skills"][0]


def protojson_seeds():
    kinds = ["SendMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
             "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
             "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard"]
    for kind, method in enumerate(kinds):
        for i, params in enumerate(V1_PARAMS[method]):
            write("protojson", f"{kind:02}-{method}-{i}", bytes([kind]) + j(params).encode())
    write("protojson", "10-v03-send", bytes([10]) + j({"message": dict(V03_MESSAGE, content=[{"text": "hi"}])}).encode())
    v03_config = {"name": "tasks/t1/pushNotificationConfigs/p1",
                  "pushNotificationConfig": {"id": "p1", "url": "https://example.com/h",
                                             "authentication": {"schemes": ["Basic"]}}}
    write("protojson", "11-v03-config", bytes([11]) + j(v03_config).encode())
    write("protojson", "12-v03-create", bytes([12]) + j({"parent": "tasks/t1", "configId": "p1",
                                                         "config": v03_config}).encode())
    write("protojson", "13-skill", bytes([13]) + j(SKILL).encode())
    write("protojson", "14-message", bytes([14]) + j(RICH_MESSAGE).encode())
    write("protojson", "15-card", bytes([15]) + j(CARD).encode())
    # Found by the CI smoke run: a lower-case `z` the generated reader took and the descriptors refused.
    write("protojson", "02-ListTasks-lowercase-z", bytes([2]) + j({"contextId": "c1", "statusTimestampAfter":
                                                                    "2026-01-01T00:00:00z"}).encode())


# --- protobuf (first byte: the type) ---------------------------------------------------------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, value):
    """A length-delimited field (bytes/str/message) or a varint field (int)."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def fields(*pairs):
    return b"".join(field(n, v) for n, v in pairs)


def double(number, value):
    import struct
    return varint(number << 3 | 1) + struct.pack("<d", value)


# google.protobuf.Struct { map<string, Value> fields = 1 }; Value { number_value = 2 (double),
# string_value = 3, bool_value = 4, struct_value = 5, list_value = 6 }
STRUCT = fields((1, fields((1, "n"), (2, double(2, 1.5)))), (1, fields((1, "s"), (2, fields((3, "x"))))))
PART_TEXT = fields((1, "hello"))
PART_DATA = fields((4, double(2, 2.0)), (5, STRUCT), (6, "f.txt"), (7, "text/plain"))
PB_MESSAGE = fields((1, "m1"), (2, "c1"), (4, 1), (5, PART_TEXT), (5, PART_DATA), (6, STRUCT), (7, "ext"))
PB_PUSH = fields((2, "p1"), (3, "t1"), (4, "https://example.com/hook"), (5, "tok"), (6, fields((1, "Bearer"))))


def protobuf_seeds():
    configuration = fields((1, "text/plain"), (2, PB_PUSH), (3, 2), (4, 1), (5, 3))
    seeds = {
        0: fields((1, "acme"), (2, PB_MESSAGE), (3, configuration), (4, STRUCT)),
        1: fields((2, "t1"), (3, 1), (4, 2)),
        2: fields((1, "acme"), (2, "c1"), (3, 3), (4, 5)),
        3: fields((2, "t1"), (3, STRUCT)),
        4: fields((1, "acme"), (2, "t1")),
        5: PB_PUSH,
        6: fields((2, "t1"), (3, "p1")),
        7: fields((1, "t1"), (2, 5), (3, "tok"), (4, "acme")),
        8: fields((2, "t1"), (3, "p1")),
        9: fields((1, "acme")),
        10: fields((1, fields((1, "m1"), (4, 1), (5, fields((1, "hi"))), (5, fields((2, fields((1, "https://example.com/f")))))))),
        11: fields((1, "tasks/t1"), (2, "p1"), (3, fields((1, "tasks/t1/pushNotificationConfigs/p1"),
                                                           (2, fields((1, "p1"), (2, "https://example.com/h")))))),
        12: fields((1, "tasks/t1"), (2, 3)),
        13: fields((1, "tasks/t1/pushNotificationConfigs/p1")),
    }
    for kind, body in seeds.items():
        write("protobuf", f"{kind:02}", bytes([kind]) + body)
    return seeds


# --- grpc-web (first byte: method | 0x10 text | 0x20 framed | 0x40 +proto | 0x80 live task) -----

def grpc_web_seeds(pb):
    framed = 0x20
    write("grpc_web", "send", bytes([0 | framed]) + fields((2, PB_MESSAGE)))
    write("grpc_web", "send-text", bytes([0 | framed | 0x10]) + fields((2, PB_MESSAGE)))
    write("grpc_web", "stream-proto", bytes([1 | framed | 0x40]) + fields((2, PB_MESSAGE)))
    write("grpc_web", "get-live", bytes([2 | framed | 0x80]) + fields((3, 1)))
    write("grpc_web", "list", bytes([3 | framed]) + pb[2])
    write("grpc_web", "cancel-live", bytes([4 | framed | 0x80]))
    write("grpc_web", "subscribe-live", bytes([5 | framed | 0x80]))
    write("grpc_web", "follow-up-live", bytes([0 | framed | 0x80]) + fields((2, PB_MESSAGE)))
    write("grpc_web", "push-create", bytes([6 | framed]) + PB_PUSH)
    write("grpc_web", "push-get", bytes([7 | framed]) + pb[6])
    write("grpc_web", "push-list", bytes([8 | framed]) + pb[7])
    write("grpc_web", "extended-card", bytes([9 | framed]))
    write("grpc_web", "push-delete", bytes([10 | framed]) + pb[8])
    write("grpc_web", "v03-send", bytes([11 | framed]) + pb[10])
    write("grpc_web", "v03-get", bytes([12 | framed]) + fields((1, "tasks/nope")))
    write("grpc_web", "health", bytes([14 | framed]))
    write("grpc_web", "unknown", bytes([15 | framed]))
    # Raw bodies: the framing itself (two frames, a trailer-flagged frame, a short frame).
    frame = lambda flag, payload: bytes([flag]) + len(payload).to_bytes(4, "big") + payload
    write("grpc_web", "raw-two-frames", bytes([2]) + frame(0, fields((2, "t1"))) + frame(0, b""))
    write("grpc_web", "raw-trailer-frame", bytes([2]) + frame(0x80, b"grpc-status:0\r\n"))
    write("grpc_web", "raw-short", bytes([2]) + b"\x00\x00\x00\x10ab")
    write("grpc_web", "raw-compressed", bytes([2]) + frame(1, b"xx"))
    write("grpc_web", "raw-text", bytes([2 | 0x10]) + base64.b64encode(frame(0, fields((2, "t1")))))
    write("grpc_web", "raw-text-bad", bytes([2 | 0x10]) + b"AAAAAA=\n=")


# --- the whole router (raw HTTP requests) ------------------------------------------------------

def jwt(claims, secret="fuzz-secret-that-is-long-enough-for-hs256"):
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
    head = b64(j({"alg": "HS256", "typ": "JWT"}).encode()) + b"." + b64(j(claims).encode())
    return (head + b"." + b64(hmac.new(secret.encode(), head, hashlib.sha256).digest())).decode()


def http(head_lines, body=b""):
    if isinstance(body, str):
        body = body.encode()
    return ("\r\n".join(head_lines) + "\r\n\r\n").encode() + body


def http_router_seeds():
    jsonrpc = ["POST /", "content-type: application/json"]
    token = jwt({"iss": "fuzz", "aud": "a2a", "sub": "alice", "exp": 4102444800, "tenants": ["acme"]})
    seeds = {
        "jsonrpc-send": http(jsonrpc, rpc("SendMessage", SEND_RICH)),
        "jsonrpc-stream": http(jsonrpc + ["a2a-version: 1.0"], rpc("SendStreamingMessage", SEND)),
        "jsonrpc-get-done": http(jsonrpc, rpc("GetTask", {"id": "$DONE", "historyLength": 1})),
        "jsonrpc-cancel-live": http(jsonrpc, rpc("CancelTask", {"id": "$LIVE"})),
        "jsonrpc-follow-up": http(jsonrpc, rpc("SendMessage", {"message": dict(MESSAGE, taskId="$LIVE")})),
        "jsonrpc-subscribe-live": http(jsonrpc + ["a2a-extensions: https://a2a-server.dev/extensions/resume/v1",
                                                  "a2a-last-generation: 1"], rpc("SubscribeToTask", {"id": "$LIVE"})),
        "jsonrpc-list": http(jsonrpc, rpc("ListTasks", {"pageSize": 2})),
        "jsonrpc-v03-send": http(jsonrpc, rpc("message/send", V03_PARAMS["message/send"])),
        "jsonrpc-v03-stream": http(jsonrpc + ["x-a2a-extensions: x"], rpc("message/stream", V03_PARAMS["message/stream"])),
        "jsonrpc-jwt": http(["POST /", "content-type: application/json", "authorization: Bearer " + token],
                            rpc("ListTasks", {"tenant": "acme"})),
        "jsonrpc-bad-key": http(jsonrpc + ["x-api-key: wrong"], rpc("GetTask", {"id": "x"})),
        "jsonrpc-text": http(["POST /", "content-type: text/plain"], "hi"),
        "jsonrpc-get": http(["GET /"]),
        "rest-send": http(["POST /message:send", "content-type: application/a2a+json",
                           "accept: application/a2a+json"], j(SEND)),
        "rest-stream": http(["POST /acme/message:stream", "content-type: application/json"], j(SEND)),
        "rest-get-done": http(["GET /tasks/$DONE?historyLength=0"]),
        "rest-cancel-live": http(["POST /tasks/$LIVE:cancel"]),
        "rest-subscribe-live": http(["GET /tasks/$LIVE:subscribe", "last-event-id: 1"]),
        "rest-list": http(["GET /tasks?status=TASK_STATE_COMPLETED&includeArtifacts=true&A2A-Version=1.0"]),
        "rest-push": http(["POST /tasks/$DONE/pushNotificationConfigs", "content-type: application/json"], j(PUSH)),
        "rest-card": http(["GET /extendedAgentCard"]),
        "v03-rest-send": http(["POST /v1/message:send", "content-type: application/json"],
                              j({"message": V03_MESSAGE})),
        "v03-rest-stream": http(["POST /v1/message:stream"], j({"message": V03_MESSAGE})),
        "v03-rest-get": http(["GET /v1/tasks/$DONE?historyLength=1"]),
        "v03-rest-cancel": http(["POST /v1/tasks/$LIVE:cancel"]),
        "v03-rest-push": http(["POST /v1/tasks/$DONE/pushNotificationConfigs"],
                              j({"pushNotificationConfig": {"url": "https://example.com/h"}})),
        "v03-rest-card": http(["GET /v1/card"]),
        # Found by fuzzing: the bare prefix fell through to the v1.0 router's 404 form.
        "v03-rest-bare-prefix": http(["GET /v1/#ard"]),
        "card": http(["GET /.well-known/agent-card.json", "if-none-match: \"x\""]),
        "card-v1": http(["GET /.well-known/agent-card.json?A2A-Version=1.0"]),
        "healthz": http(["GET /healthz"]),
        "metrics": http(["GET /metrics"]),
        "ui-task": http(["GET /ui/tasks/$DONE", "accept: text/html"]),
        "ui-asset": http(["GET /ui/assets/app.js"]),
        "preflight": http(["OPTIONS /message:send", "origin: https://app.example",
                           "access-control-request-method: POST",
                           "access-control-request-headers: content-type,a2a-version"]),
    }
    frame = lambda payload: b"\x00" + len(payload).to_bytes(4, "big") + payload
    web = lambda method: ["POST /lf.a2a.v1.A2AService/" + method, "content-type: application/grpc-web+proto",
                          "x-grpc-web: 1"]
    seeds["grpc-web-send"] = http(web("SendMessage"), frame(fields((2, PB_MESSAGE))))
    seeds["grpc-web-get"] = http(web("GetTask"), frame(fields((2, "nope"))))
    seeds["grpc-web-text-list"] = http(["POST /lf.a2a.v1.A2AService/ListTasks",
                                        "content-type: application/grpc-web-text", "accept: application/grpc-web-text"],
                                       base64.b64encode(frame(fields((3, 2)))))
    seeds["grpc-web-health"] = http(["POST /grpc.health.v1.Health/Check", "content-type: application/grpc-web"],
                                    frame(b""))
    seeds["grpc-unknown"] = http(["POST /lf.a2a.v1.A2AService/Nope", "content-type: application/grpc"], frame(b""))
    for name, data in seeds.items():
        write("http_router", name, data)


# --- the exec agent's output (first byte: the line reader's limit - 4) --------------------------

def exec_seeds():
    lines = [
        '@a2a {"status": "working on it"}',
        '@a2a{"status": null}',
        '@a2a {"inputRequired": "name?"}',
        '@a2a {"authRequired": null}',
        '@a2a {"artifact": {"name": "sum", "parts": [{"text": "42"}], "metadata": {"k": 1}}, "append": true, "lastChunk": false}',
        '@a2a {"artifact": {"artifactId": "a1", "parts": [{"data": {"x": [1, 2]}}, {"raw": "AQID"}]}}',
        '@a2a {"data": {"rows": 3}, "name": "stats"}',
        '@a2a {"status": "a", "data": 1}',
        '@a2a {"artifact": {"artifactId": "stdout", "parts": []}}',
        '@a2a is not a control line',
        'plain output ünïcödé ✓ 🦀',
    ]
    write("exec_control", "lines", bytes([252]) + ("\n".join(lines) + "\n").encode())
    write("exec_control", "split", bytes([12]) + ("x" * 40 + "\n" + "🦀" * 9 + "\n@a2a {\"status\": \"long\"}").encode())
    write("exec_control", "crlf", bytes([60]) + b'@a2a {"status": "x"}\r\nno newline at the end \xff\xfe')


def card_seeds():
    write("card_file", "full", j(CARD))
    write("card_file", "minimal", j({"name": "n", "description": "d", "version": "1", "defaultInputModes": ["text/plain"],
                                     "defaultOutputModes": ["text/plain"], "skills": [SKILL]}))
    write("card_file", "no-skills", j({"name": "n", "description": "d", "version": "1"}))
    write("card_file", "snake-case", j({"name": "n", "description": "d", "version": "1",
                                        "default_input_modes": ["a"], "default_output_modes": ["b"],
                                        "skills": [{"id": "s", "name": "S", "description": "x", "tags": ["t"]}],
                                        "provider": {"organization": "", "url": ""}}))


if __name__ == "__main__":
    jsonrpc_seeds()
    rest_seeds()
    protojson_seeds()
    grpc_web_seeds(protobuf_seeds())
    http_router_seeds()
    exec_seeds()
    card_seeds()
