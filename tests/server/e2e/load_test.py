#!/usr/bin/env python3
"""32 clients at once against `deltallm serve --parallel 4`, with mixed prompt and output lengths,
streamed and not, greedy: every answer must equal the one the same request got alone (served
one at a time first), none lost and none crossed. The wave runs twice, the second time over a warm
prefix cache."""
import json
import sys
import threading

from harness import Checks, Server, binary_from_argv, sse_events

CLIENTS = 32


def workload():
    reqs = []
    for i in range(CLIENTS):
        words = 4 + (i * 37) % 150  # 4 to 150 words
        content = f"request {i}: " + " ".join(f"w{(i * 7 + k) % 97}" for k in range(words))
        body = {"messages": [{"role": "user", "content": content}],
                "max_tokens": 3 + (i * 11) % 29, "temperature": 0, "ignore_eos": i % 2 == 0,
                "stream": i % 3 == 0}
        if i % 4 == 1:  # some share a long system prompt (prefix cache)
            body["messages"].insert(0, {"role": "system", "content": "shared " * 120})
        reqs.append(body)
    return reqs


def answer(srv, body):
    status, _, data = srv.request("POST", "/v1/chat/completions", body, timeout=120)
    assert status == 200, (status, data[:300])
    if not body["stream"]:
        r = json.loads(data)
        return r["choices"][0]["message"]["content"], r["choices"][0]["finish_reason"]
    events = sse_events(data)
    assert events[-1] == "[DONE]", events[-3:]
    text, finish = "", None
    for e in events[:-1]:
        c = json.loads(e)
        for ch in c["choices"]:
            text += ch["delta"].get("content") or ""
            finish = ch["finish_reason"] or finish
    return text, finish


def main():
    binary = binary_from_argv()
    checks = Checks()
    reqs = workload()
    with Server(binary, "--parallel", 4, "-c", 1024, "--metrics") as srv:
        alone = [answer(srv, b) for b in reqs]

        def wave():
            got = [None] * len(reqs)
            errors = []

            def client(i):
                try:
                    got[i] = answer(srv, reqs[i])
                except Exception as e:  # reported below
                    errors.append(f"client {i}: {e}")

            threads = [threading.Thread(target=client, args=(i,)) for i in range(len(reqs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not errors, errors[:3]
            lost = [i for i, g in enumerate(got) if g is None]
            assert not lost, f"no answer for {lost}"
            wrong = [i for i in range(len(reqs)) if got[i] != alone[i]]
            assert not wrong, f"{len(wrong)} answers differ from alone, e.g. {wrong[0]}: " \
                              f"{got[wrong[0]]!r} vs {alone[wrong[0]]!r}"

        checks.run(f"{CLIENTS} concurrent clients each get the answer they get alone", wave)
        checks.run("again over a warm prefix cache", wave)

        def cache_used():
            assert srv.metric("deltallm_prefix_cache_hit_tokens_total") > 0
            assert srv.metric("deltallm_requests_running") == 0
            assert srv.metric("deltallm_requests_queued") == 0

        checks.run("the prefix cache was used and nothing is left running", cache_used)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
