"""What the browser test stands on: the real server binary on a free loopback port, a
headless chromium whose console errors fail the test, and a tally of named checks."""
import json
import os
import signal
import socket
import subprocess
import time
import traceback
import urllib.request
from contextlib import contextmanager

from playwright.sync_api import sync_playwright


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """The a2a-server binary on 127.0.0.1:port (UI on by default there: a loopback listener)."""

    def __init__(self, binary, port, log_path):
        self.binary, self.port, self.log_path = binary, port, log_path
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            # --push: the page lists push configs (webhooks to loopback are refused, never sent).
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--drain-timeout-secs", "1", "--push"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not answer /healthz within 30 s")

    def kill(self):
        """Dies at once, like a crash: no drain."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def get(self, path, body=None):
        """GET `path`, or POST `body` as JSON to it; (status, headers, JSON)."""
        request = urllib.request.Request(self.url + path)
        if body is not None:
            request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"{}")


class Browser:
    """Pages whose console errors and uncaught exceptions are collected; any fails the check
    that opened the page unless that check says which ones it expects."""

    def __init__(self, chromium):
        self.chromium = chromium
        self.errors = []

    def __enter__(self):
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(
            executable_path=self.chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        return self

    def __exit__(self, *exc):
        self.browser.close()
        self.playwright.stop()

    def page(self, width=1200, height=900):
        context = self.browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text} ({m.location})"))
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        return page


class Tally:
    def __init__(self, browser):
        self.browser, self.passed, self.failed = browser, 0, []

    @contextmanager
    def check(self, name, allowed_errors=()):
        """A named check: fails on an exception or on a console error it does not allow (a
        substring, or a predicate of the error text)."""
        self.browser.errors.clear()
        started = time.monotonic()
        try:
            yield
            errors = [e for e in self.browser.errors
                      if not any(a(e) if callable(a) else a in e for a in allowed_errors)]
            if errors:
                raise AssertionError("browser console errors:\n  " + "\n  ".join(errors))
        except Exception as error:  # noqa: BLE001 - every failure is reported, then counted
            self.failed.append(name)
            print(f"FAIL {name}: {error}")
            # A bare `assert` says nothing: its line does.
            traceback.print_exc(limit=-1 if isinstance(error, AssertionError) else None)
            return
        self.passed += 1
        print(f"PASS {name} ({time.monotonic() - started:.1f} s)")

    def close(self):
        total = len(self.failed)
        if total:
            print("failed:", ", ".join(self.failed))
        print(f"{self.passed} passed, {total} failed")
        return 1 if total else 0


def ensure_dir(path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
