#!/usr/bin/env python3
"""The attacks of the security issue, against a server binary, reporting its resident memory.

    python3 tests/attacks/rss.py target/release/a2a-server [amplification|data|tasks|idle ...]

Standard library only. Each attack starts its own server on a free loopback port with the
default limits (plus the flags named below), runs, and prints VmRSS before and after, what the
server answered, and its open descriptors. Numbers, not assertions: the limits' behaviour is
asserted by tests/limits.rs and tests/connections.rs; this is what the closing note measures.

- amplification: 20 JSON-RPC requests of 100,000 one-word text parts (about 2 MB each), then
  20 grpc-web requests (the gRPC decoder) of 550,000 one-byte parts, one after another.
- data: 20 JSON-RPC requests just under 4 MiB whose one data part holds 1.9 million numbers
  (no parts limit applies; what decoding a dense request costs at its peak).
- tasks: 100,000 SendMessage calls that each leave an INPUT_REQUIRED task, from one principal.
- idle: 2,000 TCP connections that never send a byte, with the server's open-file limit at
  1,024 (as in the issue); then a probe on a new connection, and the state after the idle
  timeout (set to 10 s here so the run is short; the default is 120 s).
"""
import http.client
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Server:
    def __init__(self, binary, args=(), nofile=None):
        self.port = free_port()
        cmd = [binary, "--listen", f"127.0.0.1:{self.port}", *args]

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the server did not start")

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def rss(self):
        return rss_mib(self.proc.pid)

    def peak(self):
        """The most resident memory the server has had (VmHWM)."""
        return rss_mib(self.proc.pid, "VmHWM")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def jsonrpc(conn, method, params, id_=1):
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}, separators=(",", ":"))
    conn.request("POST", "/", body, {"Content-Type": "application/json"})
    return json.loads(conn.getresponse().read())


def message(parts, text="hello"):
    return {"message": {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": [{"text": text}] * parts}}


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def grpc_web_send(parts, text=b"a"):
    part = field(1, text)
    msg = field(1, b"m-" + os.urandom(8).hex().encode()) + b"\x20\x01" + field(5, part) * parts
    request = field(2, msg)
    return b"\x00" + struct.pack(">I", len(request)) + request


def reason(answer):
    error = answer.get("error")
    if not error:
        return "accepted"
    data = error.get("data") or [{}]
    return data[0].get("reason", str(error.get("code")))


def amplification(binary):
    server = Server(binary)
    conn = server.conn()
    jsonrpc(conn, "SendMessage", message(1))
    time.sleep(0.5)
    before = server.rss()
    answers = {}
    for i in range(20):
        a = reason(jsonrpc(conn, "SendMessage", message(100_000, "word"), i))
        answers[a] = answers.get(a, 0) + 1
    time.sleep(0.5)
    after_json = server.rss()
    body = grpc_web_send(550_000)
    for _ in range(20):
        conn.request("POST", "/lf.a2a.v1.A2AService/SendMessage", body, {"Content-Type": "application/grpc-web+proto"})
        response = conn.getresponse()
        data = response.read()
        status = response.getheader("grpc-status") or (b"grpc-status:" in data and data.split(b"grpc-status:")[1][:3].strip().decode())
        key = f"grpc-web status {status}"
        answers[key] = answers.get(key, 0) + 1
    time.sleep(0.5)
    print(f"amplification: JSON-RPC body {len(json.dumps(message(100_000, 'word'))) / 1e6:.1f} MB, grpc-web body {len(body) / 1e6:.1f} MB")
    print(f"  RSS before {before:.0f} MiB, after 20 JSON-RPC {after_json:.0f} MiB, after 20 grpc-web {server.rss():.0f} MiB; peak {server.peak():.0f} MiB; answers {answers}")
    server.stop()


def data(binary):
    """20 JSON-RPC requests just under the 4 MiB request limit whose one data part is an array
    of 1.9 million zeros: no parts limit applies; each is refused by --max-task-bytes after
    decoding, so this shows what decoding a dense request costs at its peak."""
    server = Server(binary)
    conn = server.conn()
    jsonrpc(conn, "SendMessage", message(1))
    time.sleep(0.5)
    before = server.rss()
    params = {"message": {"messageId": "d", "role": "ROLE_USER", "parts": [{"data": [0] * 1_900_000}]}}
    answers = {}
    for i in range(20):
        a = reason(jsonrpc(conn, "SendMessage", params, i))
        answers[a] = answers.get(a, 0) + 1
    time.sleep(0.5)
    size = len(json.dumps(params, separators=(",", ":"))) / 1e6
    print(f"data: 20 JSON-RPC bodies of {size:.1f} MB, one data part of 1.9 million numbers")
    print(f"  RSS before {before:.0f} MiB, after {server.rss():.0f} MiB; peak {server.peak():.0f} MiB; answers {answers}")
    server.stop()


def tasks(binary, count=100_000):
    server = Server(binary)
    conn = server.conn()
    time.sleep(0.3)
    before = server.rss()
    answers = {}
    start = time.time()
    for i in range(count):
        a = reason(jsonrpc(conn, "SendMessage", message(1, "input"), i))
        answers[a] = answers.get(a, 0) + 1
    elapsed = time.time() - start
    time.sleep(1)
    listing = jsonrpc(conn, "ListTasks", {"pageSize": 50})
    print(f"tasks: {count} 'input' SendMessage calls from one principal in {elapsed:.0f} s; answers {answers}")
    print(f"  RSS before {before:.0f} MiB, after {server.rss():.0f} MiB; ListTasks totalSize {listing.get('result', {}).get('totalSize')}")
    server.stop()


def idle(binary, count=2000):
    server = Server(binary, ["--idle-connection-secs", "10"], nofile=1024)
    time.sleep(0.3)
    before, fds_before = server.rss(), fds(server.proc.pid)
    held = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", server.port))
        held.append(s)
    time.sleep(3)
    ticks = cpu_ticks(server.proc.pid)
    time.sleep(2)
    spent = cpu_ticks(server.proc.pid) - ticks
    print(f"idle: {count} silent connections to a server limited to 1,024 open files")
    print(f"  RSS before {before:.0f} MiB, with them {server.rss():.0f} MiB; server descriptors {fds_before} -> {fds(server.proc.pid)}; CPU over 2 s: {spent} ticks (100 = one core)")
    start = time.time()
    probe = server.conn()
    probe.request("GET", "/healthz")
    status = probe.getresponse().status
    print(f"  a new request while they are held: HTTP {status} after {time.time() - start:.1f} s (the idle timeout, 10 s here, frees the cap)")
    time.sleep(1)
    print(f"  after the idle timeout: RSS {server.rss():.0f} MiB, server descriptors {fds(server.proc.pid)}")
    for s in held:
        s.close()
    server.stop()


if __name__ == "__main__":
    binary = sys.argv[1]
    which = sys.argv[2:] or ["amplification", "tasks", "idle"]
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    for name in which:
        {"amplification": amplification, "data": data, "tasks": tasks, "idle": idle}[name](binary)
