"""Starts `deltallm serve` on a free loopback port and talks raw HTTP to it (stdlib only).

Used by the server's end-to-end tests: Server(binary, *flags) is a context manager that waits for
/health to say 200, and on exit sends SIGTERM and checks that the server stopped with code 0.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time


class Server:
    def __init__(self, binary, *flags, ready=True):
        self.binary = binary
        self.flags = [str(f) for f in flags]
        self.wait_ready = ready
        self.log = []
        self.port = None
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--port", "0", *self.flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        listening = threading.Event()

        def drain():
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.log.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    listening.set()
            listening.set()

        threading.Thread(target=drain, daemon=True).start()
        if not listening.wait(60) or self.port is None:
            self.proc.kill()
            raise RuntimeError("the server did not start:\n" + "\n".join(self.log))
        if self.wait_ready:
            self.until_ready()
        return self

    def until_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the server did not become ready:\n" + "\n".join(self.log))

    def __exit__(self, kind, value, tb):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise RuntimeError("the server did not stop within 60 s of SIGTERM")
        else:
            rc = self.proc.returncode
        if kind is None and rc != 0:
            raise RuntimeError(f"the server exited with {rc}:\n" + "\n".join(self.log[-20:]))
        return False

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers, body bytes); body may be bytes, str or a JSON value."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c = self.connection(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, method, path, body=None, headers=None):
        status, _, data = self.request(method, path, body, headers)
        return status, json.loads(data) if data else None

    def metric(self, name, headers=None):
        status, _, data = self.request("GET", "/metrics", headers=headers)
        assert status == 200, status
        for line in data.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)


def sse_events(data):
    """The data payloads of an SSE body."""
    out = []
    for block in data.decode("utf-8").split("\n\n"):
        lines = [l[5:].lstrip(" ") for l in block.split("\n") if l.startswith("data:")]
        if lines:
            out.append("\n".join(lines))
    return out


class Checks:
    """Named checks that all run; a summary line at the end, exit status 1 on any failure."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def run(self, name, fn, *args):
        t = time.time()
        try:
            fn(*args)
            self.passed += 1
            print(f"ok   {name} ({time.time() - t:.2f} s)", flush=True)
        except Exception as e:  # a check that fails must not stop the others
            self.failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)

    def finish(self):
        print(f"{self.passed} passed, {len(self.failed)} failed")
        return 1 if self.failed else 0


def binary_from_argv():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("DELTALLM_BIN", "deltallm")
