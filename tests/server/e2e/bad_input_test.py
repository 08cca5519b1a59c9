#!/usr/bin/env python3
"""`deltallm serve` against bad input, over raw HTTP: malformed JSON, wrong types, bad sizes,
huge bodies, bodies of no plain length, unknown models and routes, keys, a slow client, many
clients that send a byte now and then, a client that leaves mid-stream, a full queue. Every answer
must be an OpenAI error with the right status, and afterwards the server must still be up with
nothing running."""
import json
import pathlib
import random
import re
import resource
import signal
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time

from harness import Checks, Server, binary_from_argv, sse_events

CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hello"}]


def expect_error(srv, status, body, path=CHAT, method="POST", headers=None, says=None):
    got, hdrs, data = srv.request(method, path, body, headers)
    assert got == status, f"status {got}, body {data[:300]!r}"
    err = json.loads(data)["error"]
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err
    assert err["code"] == status, err
    if says:
        assert says in err["message"], err["message"]
    return err, hdrs


def malformed_json(srv):
    for body in ["{", "{\"messages\": [}", "nul", "[1,2", "\xff\xfe", ""]:
        expect_error(srv, 400, body)
    expect_error(srv, 400, "[1, 2]", says="object")
    expect_error(srv, 400, "{\"x\": " + "[" * 5000 + "]" * 5000 + "}", says="deeper")


def wrong_types(srv):
    cases = [
        {"messages": "hello"},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"messages": []},
        {"messages": MSG, "temperature": "hot"},
        {"messages": MSG, "max_tokens": "10"},
        {"messages": MSG, "stream": "yes"},
        {"messages": MSG, "stop": 7},
        {"messages": MSG, "seed": [1]},
        {"messages": MSG, "top_logprobs": 3},
        {"messages": MSG, "n": 3},
        {"messages": MSG, "response_format": {"type": "json_schema"}},
        {"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"schema": 3}}},
        {"messages": MSG, "response_format": {"type": "json_schema",
                                              "json_schema": {"schema": {"type": "array"}}}},
        {"messages": MSG, "response_format": {"type": "grammar"}},
        {"messages": MSG, "response_format": {"type": 5}},
        {"messages": MSG, "tools": "none"},
        {"messages": MSG, "tool_choice": "required"},
        {"messages": MSG, "tool_choice": {"type": "function", "function": {"name": "f"}}},
        {"messages": MSG, "tool_choice": "sometimes"},
        {"messages": MSG, "chat_template_kwargs": [1]},
    ]
    for body in cases:
        expect_error(srv, 400, body)
    expect_error(srv, 400, {"prompt": {"a": 1}}, path="/v1/completions")
    expect_error(srv, 400, {"prompt": [1, 99999999]}, path="/v1/completions")
    for extra in ({"echo": True}, {"suffix": "end"}, {"best_of": 3}, {"echo": "yes"}):
        expect_error(srv, 400, {"prompt": "x", **extra}, path="/v1/completions")
    expect_error(srv, 400, {"content": 5}, path="/tokenize")
    expect_error(srv, 400, {"tokens": [-1]}, path="/detokenize")
    # An id past 2^63 is named as sent, not wrapped to a negative number.
    expect_error(srv, 400, {"tokens": [9223372036854775808]}, path="/detokenize",
                 says="9223372036854775808")
    expect_error(srv, 400, {"prompt": [1, 18446744073709551615]}, path="/v1/completions",
                 says="18446744073709551615 in 'prompt'")
    expect_error(srv, 400, {"tokens": "abc"}, path="/detokenize")


def bad_max_tokens(srv):
    expect_error(srv, 400, {"messages": MSG, "max_tokens": -1}, says="at least 1")
    expect_error(srv, 400, {"messages": MSG, "max_tokens": 0})
    expect_error(srv, 400, {"messages": MSG, "max_tokens": 10**15}, says="4096")
    expect_error(srv, 400, {"messages": MSG, "max_tokens": 10**30})
    # Fits alone, not with the prompt: the message gives both numbers.
    err, _ = expect_error(srv, 400, {"messages": MSG, "max_tokens": 4090})
    assert "4090" in err["message"] and "4096" in err["message"], err
    long = {"messages": [{"role": "user", "content": "word " * 5000}], "max_tokens": 4}
    err, _ = expect_error(srv, 400, long, says="4096")


def huge_body(srv):
    body = b'{"messages": [{"role": "user", "content": "' + b"a" * (10 << 20) + b'"}]}'
    expect_error(srv, 413, body)
    # The same size sent in chunks, without a length.
    c = srv.connection()
    c.putrequest("POST", CHAT)
    c.putheader("Content-Type", "application/json")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    try:
        for i in range(0, len(body), 1 << 20):
            part = body[i:i + (1 << 20)]
            c.send(b"%x\r\n%s\r\n" % (len(part), part))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        assert r.status == 413, r.status
        assert json.loads(r.read())["error"]["code"] == 413
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close on the oversized body before reading it all
    finally:
        c.close()


def many_keys_and_messages(srv):
    """Objects of very many keys, and chats of very many messages, are refused quickly (the
    parser keeps keys in order: their cost grows as the square of their number)."""
    wide = {f"k{i}": 0 for i in range(300000)}
    wide["messages"] = MSG
    t = time.time()
    expect_error(srv, 400, wide, says="keys")
    expect_error(srv, 400, {"messages": MSG, "response_format": {"type": "json_schema",
                 "json_schema": {"schema": {"type": "object", "properties": {
                     f"p{i}": {"type": "integer"} for i in range(80000)}}}}}, says="keys")
    expect_error(srv, 400, {"messages": [{"role": "user", "content": ""}] * 60000}, says="messages")
    assert time.time() - t < 10, f"refused after {time.time() - t:.1f} s"


def unknown_model_and_route(srv):
    expect_error(srv, 404, {"model": "gpt-9", "messages": MSG}, says="gpt-9")
    expect_error(srv, 404, None, path="/v1/models/gpt-9", method="GET")
    expect_error(srv, 404, None, path="/v1/nothing", method="GET")
    expect_error(srv, 404, {"x": 1}, path="/v1/embeddings")
    expect_error(srv, 404, None, path=CHAT, method="GET")
    expect_error(srv, 404, None, path="/../../etc/passwd", method="GET")
    # A Range header is ignored: the answers come whole (not cut mid-JSON, not an empty 416).
    for path, method, body, rng in ((CHAT, "POST", {"messages": MSG, "max_tokens": 2}, "bytes=0-10"),
                                    ("/props", "GET", None, "bytes=999999-"),
                                    ("/v1/nothing", "GET", None, "bytes=0-3")):
        status, hdrs, data = srv.request(method, path, body, {"Range": rng})
        assert status in (200, 404), (path, status, data[:200])
        json.loads(data)
        assert "content-range" not in {k.lower() for k in dict(hdrs)}, (path, hdrs)


def raw_exchange(srv, data, timeout=10):
    """Sends raw bytes on a new connection; returns (status, body) of the first answer."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            piece = s.recv(65536)
            assert piece, got[:200]
            got += piece
        head, _, body = got.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(body) < length:
            piece = s.recv(65536)
            assert piece, body[:200]
            body += piece
        return int(head.split()[1]), body[:length]
    finally:
        s.close()


def bad_framing(srv):
    """A body whose length the headers do not say plainly is refused at once (not after the read
    timeout), before any of it is read; nothing after it on the connection is taken for a
    request."""
    body = json.dumps({"messages": MSG, "max_tokens": 1})
    head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    cases = [
        (400, f"Content-Length: -5\r\n\r\n{body}"),
        (400, f"Content-Length: abc\r\n\r\n{body}"),
        (400, f"Content-Length: 99999999999999999999999\r\n\r\n{body}"),
        (400, f"Content-Length: 5\r\nContent-Length: {len(body)}\r\n\r\n{body}"),
        (413, f"Content-Length: 999999999999\r\n\r\n{body}"),
        (400, f"Transfer-Encoding: gzip\r\n\r\n{body}"),
        (400, f"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
              f"{len(body):x}\r\n{body}\r\n0\r\n\r\n"),
        # Neither length nor chunks: no body (the library would wait for one until the close).
        (411, "\r\n"),
        # A control character in a header, and a NUL in the body (JSON never holds one).
        (400, f"X-A: a\x00b\r\nContent-Length: {len(body)}\r\n\r\n{body}"),
        (400, f"Content-Length: {len(body) + 4}\r\n\r\n{body}\x00xyz"),
    ]
    for want, rest in cases:
        t = time.time()
        status, data = raw_exchange(srv, (head + rest).encode())
        assert status == want, (rest[:60], status, data[:200])
        err = json.loads(data)["error"]
        assert err["code"] == want and err["message"], err
        assert time.time() - t < 3, (rest[:60], f"answered after {time.time() - t:.1f} s")
    # A second length that would smuggle a request after the first: one answer, the 400.
    smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=40)
    s.sendall((head + f"Content-Length: 0\r\nContent-Length: {len(smuggled)}\r\n\r\n"
               + smuggled).encode())
    got = b""
    try:
        while True:
            piece = s.recv(65536)
            if not piece:
                break
            got += piece
    except ConnectionResetError:
        pass
    s.close()
    assert got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1 ") == 1, got[:300]
    # Chunks, and a plain length, still work.
    status, data = raw_exchange(srv, (head + f"Transfer-Encoding: Chunked\r\n\r\n{len(body):x}"
                                      f"\r\n{body}\r\n0\r\n\r\n").encode())
    assert status == 200, (status, data[:200])
    status, data = raw_exchange(srv, (head + f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    assert status == 200, (status, data[:200])


def slow_client(srv):
    """Sends a request a few bytes at a time; meanwhile other requests are served."""
    body = json.dumps({"messages": MSG, "max_tokens": 3, "temperature": 0}).encode()
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    data = head + body
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        step = max(1, len(data) // 12)
        for i in range(0, len(data), step):
            s.sendall(data[i:i + step])
            time.sleep(0.1)
            if i == step * 3:  # a fast client in the middle of it
                status, _, _ = srv.request("POST", CHAT, {"messages": MSG, "max_tokens": 2})
                assert status == 200, status
        reply = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    finally:
        s.close()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    obj = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert obj["usage"]["completion_tokens"] == 3, obj


def wait_idle(srv, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if srv.metric("deltallm_requests_running") == 0 and \
                srv.metric("deltallm_requests_queued") == 0:
            return
        time.sleep(0.05)
    raise AssertionError("requests still running after the client left")


def disconnect_mid_stream(srv):
    before = srv.metric("deltallm_generated_tokens_total")
    body = json.dumps({"messages": MSG, "max_tokens": 3000, "ignore_eos": True, "stream": True,
                       "temperature": 0}).encode()
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(head + body)
    got = b""
    while got.count(b"data:") < 4:
        piece = s.recv(4096)
        assert piece, got[:300]
        got += piece
    s.close()  # gone mid-stream
    wait_idle(srv)
    made = srv.metric("deltallm_generated_tokens_total") - before
    assert made < 3000, f"the request ran to its end ({made} tokens) after the client left"


def disconnect_before_answer(srv):
    """A request answered in one piece (not streamed) whose client leaves while it runs: it is
    cancelled then, not run to its end."""
    before = srv.metric("deltallm_generated_tokens_total")
    body = json.dumps({"messages": MSG, "max_tokens": 3000, "ignore_eos": True,
                       "temperature": 0}).encode()
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(head + body)
    deadline = time.time() + 20
    while srv.metric("deltallm_generated_tokens_total") - before < 8:
        assert time.time() < deadline, "the request did not start generating"
        time.sleep(0.02)
    s.close()  # gone before the answer
    wait_idle(srv)
    made = srv.metric("deltallm_generated_tokens_total") - before
    assert made < 3000, f"the request ran to its end ({made} tokens) after the client left"


def full_queue(binary):
    with Server(binary, "--parallel", 1, "--queue", 1, "--metrics") as srv:
        long = {"messages": MSG, "max_tokens": 4000, "ignore_eos": True, "stream": True}
        conns = []
        for _ in range(2):  # one running, one waiting
            c = srv.connection()
            c.request("POST", CHAT, json.dumps(long), {"Content-Type": "application/json"})
            conns.append(c)
            time.sleep(0.05)
        deadline = time.time() + 10
        while (srv.metric("deltallm_requests_running"), srv.metric("deltallm_requests_queued")) \
                != (1, 1):
            assert time.time() < deadline, "the two long requests did not start"
            time.sleep(0.02)
        try:
            err, hdrs = expect_error(srv, 503, {"messages": MSG, "max_tokens": 2})
            assert "Retry-After" in hdrs, hdrs
        finally:
            for c in conns:
                c.close()
        wait_idle(srv)


def answered_within(srv, seconds, times, pause=0.0):
    """Sends a short chat request `times` times; each must be answered 200 within `seconds`."""
    for _ in range(times):
        start = time.time()
        status, _, data = srv.request("POST", CHAT, {"messages": MSG, "max_tokens": 2},
                                      timeout=seconds + 15)
        assert status == 200, (status, data[:200])
        took = time.time() - start
        assert took < seconds, f"answered after {took:.1f} s"
        time.sleep(pause)


def slow_clients(binary):
    """Clients that send their request a byte now and then (more of them than the server has
    workers) neither keep others waiting nor stay connected past --timeout; a client that keeps
    its connection and asks again and again is not cut off by it."""
    with Server(binary, "--parallel", 1, "--queue", 2, "--timeout", 3, "--metrics") as srv:
        slow = []
        for i in range(60):  # the server has 1 + 2 + 16 workers
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            # Half of them trickle their headers, half a body they announced.
            head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\n"
            if i % 2:
                head += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            s.sendall(head.encode())
            slow.append(s)
        stop = threading.Event()

        def trickle():
            while not stop.wait(0.5):
                for s in slow:
                    try:
                        s.sendall(b"X")
                    except OSError:
                        pass

        threading.Thread(target=trickle, daemon=True).start()
        try:
            time.sleep(1.5)
            answered_within(srv, 4, times=3)
            # One connection, a request every 0.25 s for longer than --timeout: never cut off.
            c = srv.connection(10)
            for _ in range(18):
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                assert r.status == 200, r.status
                time.sleep(0.25)
            c.close()
            # By now (over 6 s) every slow client is gone: the server closed its end.
            time.sleep(1)
            for s in slow:
                s.settimeout(2)
                try:
                    while s.recv(4096):
                        pass
                except (ConnectionResetError, BrokenPipeError):
                    pass
                except socket.timeout:
                    raise AssertionError("a slow client is still connected past --timeout")
        finally:
            stop.set()
            for s in slow:
                s.close()
        assert any("sent no whole request" in line or "workers taken" in line
                   for line in srv.log), srv.log[-5:]
        assert srv.metric("deltallm_http_connections_cut_off_total") >= 60
        assert srv.metric("deltallm_http_connections") <= 2  # this request's own


def held_connections(binary):
    """Hundreds of connections that send part of their headers and hold them (each reopened when
    the server closes it) do not keep a client that sends its request at once waiting: a worker
    takes a connection that holds a whole request before those ahead of it. Started under the
    usual soft limit of 1,024 descriptors, the server raises its own to the hard limit (each
    connection holds two)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    with Server(binary, "--parallel", 1, "--queue", 2) as srv:
        limits = pathlib.Path(f"/proc/{srv.proc.pid}/limits").read_text()
        row = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert row.split()[3] == row.split()[4], row
        stop = threading.Event()
        opened = [0]

        def attack():
            sel = selectors.DefaultSelector()

            def open_one():
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.setblocking(False)
                s.send(b"GET /health HTTP/1.1\r\nX-")
                sel.register(s, selectors.EVENT_READ)
                opened[0] += 1

            for _ in range(400):
                open_one()
            while not stop.is_set():
                for key, _ in sel.select(0.1):
                    try:
                        data = key.fileobj.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                        open_one()
            for key in list(sel.get_map().values()):
                key.fileobj.close()

        t = threading.Thread(target=attack, daemon=True)
        t.start()
        try:
            time.sleep(3)
            answered_within(srv, 2.5, times=4, pause=0.5)
        finally:
            stop.set()
            t.join(10)
        assert opened[0] > 400, opened[0]  # the server did close held connections
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def keys(binary):
    with Server(binary, "--api-key", "sk-right", "-c", 256) as srv:
        expect_error(srv, 401, {"messages": MSG, "max_tokens": 1})
        expect_error(srv, 401, {"messages": MSG, "max_tokens": 1},
                     headers={"Authorization": "Bearer sk-wrong"})
        expect_error(srv, 401, {"messages": MSG, "max_tokens": 1},
                     headers={"Authorization": "Bearer sk-righ"})
        expect_error(srv, 401, None, path="/v1/models", method="GET",
                     headers={"Authorization": "Basic sk-right"})
        # The right key with more after a NUL is refused (no reader may cut the value short).
        status, data = raw_exchange(srv, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                                    b"Authorization: Bearer sk-right\x00junk\r\n\r\n")
        assert status in (400, 401), (status, data[:200])
        status, _ = srv.json("POST", CHAT, {"messages": MSG, "max_tokens": 1},
                             headers={"Authorization": "Bearer sk-right"})
        assert status == 200, status
        assert srv.request("GET", "/health")[0] == 200


def other_routes(srv):
    status, props = srv.json("GET", "/props")
    assert status == 200, status
    assert props["n_ctx"] == 4096 and props["total_slots"] == 2, props
    assert "<|im_start|>" in props["chat_template"], props["chat_template"][:200]
    assert props["eos_token"] == "<|im_end|>", props
    status, models = srv.json("GET", "/v1/models")
    model = models["data"][0]["id"]
    assert srv.json("GET", f"/v1/models/{model}")[1]["id"] == model
    status, t = srv.json("POST", "/tokenize", {"content": "hello <|im_end|> world"})
    assert status == 200 and len(t["tokens"]) > 3, t
    status, d = srv.json("POST", "/detokenize", {"tokens": t["tokens"]})
    assert d["content"] == "hello <|im_end|> world", d
    # Pieces: text where a token is whole UTF-8, its bytes where it is part of a character.
    status, t = srv.json("POST", "/tokenize", {"content": "\u00e9\u4e16 a", "with_pieces": True})
    joined = b"".join(bytes(p["piece"]) if isinstance(p["piece"], list)
                      else p["piece"].encode() for p in t["tokens"])
    assert joined == "\u00e9\u4e16 a".encode(), t
    assert all("\ufffd" not in p["piece"] for p in t["tokens"] if isinstance(p["piece"], str)), t
    status, p = srv.json("POST", "/apply-template", {"messages": MSG})
    assert p["prompt"] == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", p


ODD_VALUES = [None, True, 0, -1, 2**40, -2**63, 3.5, 1e300, "", "user", "{bad", "<|im_end|>",
              "</tool_call>", [], {}, [None], [{"type": "text"}], {"type": "function"},
              [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]]


def mutated(rng):
    """A valid chat request with one or two fields replaced by odd values."""
    body = {"messages": [{"role": "system", "content": "terse"},
                         {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function",
                              "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "42"},
                         {"role": "user", "content": "and?"}],
            "tools": [{"type": "function", "function": {
                "name": "f", "parameters": {"type": "object",
                                            "properties": {"a": {"type": "integer"}}}}}],
            "max_tokens": 2, "temperature": 0}
    paths = [("max_tokens",), ("temperature",), ("stop",), ("seed",), ("tools",), ("tool_choice",),
             ("chat_template_kwargs",), ("logprobs",), ("stream_options",), ("messages",),
             ("tools", 0, "function"), ("tools", 0, "function", "parameters"),
             ("tools", 0, "function", "name")]
    for i in range(5):
        paths += [("messages", i), ("messages", i, "role"), ("messages", i, "content")]
    paths += [("messages", 2, "tool_calls"), ("messages", 2, "tool_calls", 0, "function"),
              ("messages", 2, "tool_calls", 0, "function", "arguments"),
              ("messages", 3, "tool_call_id"), ("messages", 1, "content", 0, "text")]
    for _ in range(rng.randint(1, 2)):
        path = rng.choice(paths)
        target = body
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = rng.choice(ODD_VALUES)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation replaced a parent
    return body


def random_mutations(srv):
    rng = random.Random(20261205)
    seen = {}
    for _ in range(300):
        body = mutated(rng)
        status, _, data = srv.request("POST", CHAT, body)
        seen[status] = seen.get(status, 0) + 1
        assert status in (200, 400), f"{status} for {json.dumps(body)[:400]}: {data[:300]!r}"
        if status == 400:
            assert json.loads(data)["error"]["code"] == 400
    assert seen.get(200, 0) > 10 and seen.get(400, 0) > 10, seen


def still_up(srv):
    status, body = srv.json("GET", "/health")
    assert status == 200 and body["status"] == "ok", (status, body)
    status, body = srv.json("POST", CHAT, {"messages": MSG, "max_tokens": 2})
    assert status == 200 and body["usage"]["completion_tokens"] == 2, body
    wait_idle(srv)


def graceful_stop(binary):
    """SIGTERM lets a running stream finish; new requests meanwhile get a 503; exit code 0."""
    srv = Server(binary, "--parallel", 2)
    with srv:
        body = {"messages": MSG, "max_tokens": 1000, "ignore_eos": True, "stream": True,
                "temperature": 0}
        c = srv.connection()
        c.request("POST", CHAT, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        first = r.read(64)  # the first event has begun
        assert first.startswith(b"data:"), first
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        try:
            status, _, _ = srv.request("POST", CHAT, {"messages": MSG, "max_tokens": 1})
            assert status == 503, status
        except ConnectionError:
            pass  # or the address is closed already
        rest = first + r.read()
        c.close()
        events = sse_events(rest)
        assert events[-1] == "[DONE]", events[-2:]
        finish = [json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1]
                  if json.loads(e)["choices"]]
        assert finish[-1] == "length", finish[-3:]
        assert srv.proc.wait(30) == 0


def health_while_loading(binary):
    """/health answers from the moment the port is bound: 503 while the model loads, then 200."""
    with Server(binary, ready=False) as srv:
        seen = []
        deadline = time.time() + 60
        while time.time() < deadline:
            status, _, data = srv.request("GET", "/health")
            seen.append(status)
            if status == 503:
                assert json.loads(data)["error"]["code"] == 503
            if status == 200:
                break
        assert seen[-1] == 200 and set(seen) <= {200, 503}, seen


def bad_flags(binary, tmp):
    """Each bad flag is one error line and exit code 1, before anything is served."""
    bad_template = f"{tmp}/bad.jinja"
    with open(bad_template, "w") as f:
        f.write("{% for x in %}")
    for flags in (["--port", "70000"], ["--parallel", "0"], ["--api-key-file", f"{tmp}/none"],
                  ["--chat-template-file", bad_template], ["--host", "999.1.1.1"],
                  ["--api-key", "a", "--api-key-file", bad_template], ["--queue", "-1"],
                  ["--cache-mib", "-5"], ["--cache-mib", "lots"], ["--cache-mib", "nan"],
                  ["--cache-mib", "1e9"], ["--cache-mib", "12x"], ["--device", "tpu"],
                  ["--api-key", ""], ["--api-key", " "], ["-m", f"{tmp}/none.gguf"],
                  ["-m", tmp], ["-c", "-1"], ["--timeout", "0"], ["--timeout", "nan"],
                  ["--timeout", "1e9"]):
        p = subprocess.run([binary, "serve", "--port", "0", *flags], capture_output=True,
                           text=True, timeout=60)
        errors = [l for l in p.stderr.splitlines() if l.startswith("error:")]
        assert p.returncode == 1 and len(errors) == 1, (flags, p.returncode, p.stderr)
        assert "listening" not in p.stderr, (flags, p.stderr)
    # A number past the integer's range is named as sent, not saturated.
    p = subprocess.run([binary, "serve", "--port", "0", "--parallel", "99999999999999999999"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "99999999999999999999" in p.stderr, p.stderr


def main():
    binary = binary_from_argv()
    checks = Checks()
    with Server(binary, "--metrics", "--parallel", 2) as srv:
        checks.run("malformed JSON is a 400", malformed_json, srv)
        checks.run("wrong field types are 400s", wrong_types, srv)
        checks.run("negative, huge and too-long max_tokens are 400s", bad_max_tokens, srv)
        checks.run("a 10 MB body is a 413", huge_body, srv)
        checks.run("unknown models and routes are 404s", unknown_model_and_route, srv)
        checks.run("very many keys or messages are a quick 400", many_keys_and_messages, srv)
        checks.run("a body of no plain length is refused at once", bad_framing, srv)
        checks.run("a slow client is served, and others meanwhile", slow_client, srv)
        checks.run("a client that leaves mid-stream cancels its request",
                   disconnect_mid_stream, srv)
        checks.run("a client that leaves before a whole answer cancels its request",
                   disconnect_before_answer, srv)
        checks.run("props, tokenize, detokenize and apply-template answer", other_routes, srv)
        checks.run("odd values in a valid request are 200s or 400s, never 5xx",
                   random_mutations, srv)
        checks.run("after all of it the server is up with nothing running", still_up, srv)
    checks.run("a full queue is a 503 with Retry-After", full_queue, binary)
    checks.run("slow clients neither hold the server nor stay past --timeout", slow_clients,
               binary)
    checks.run("held connections do not keep a whole request waiting", held_connections, binary)
    checks.run("a missing or wrong key is a 401", keys, binary)
    with tempfile.TemporaryDirectory() as tmp:
        checks.run("bad flags are one error line and exit code 1", bad_flags, binary, tmp)
    checks.run("SIGTERM lets running requests finish and exits 0", graceful_stop, binary)
    checks.run("/health is 503 while loading, then 200", health_while_loading, binary)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
