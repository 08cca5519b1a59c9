#!/usr/bin/env python3
"""Measures an OpenAI-compatible server (deltallm serve, llama-server, vLLM, ...) under load, with
the Python standard library only (asyncio, raw HTTP/1.1, streamed chat completions).

For each concurrency level it sends the workload's requests with that many in flight and reports:
TTFT (time to the first generated text), TPOT (time per output token after the first), ITL (time
between streamed pieces), end-to-end latency (mean, median, p99 of each), request and output-token
throughput, and goodput: requests per second that met the SLO (--slo-ttft-ms, --slo-tpot-ms).

Workloads:
  random     prompts and output lengths drawn at random (--input-words, --output-tokens ranges)
  long       long prompts (--long-words), short outputs: prefill under load
  multiturn  each request is a conversation of --turns turns, each turn sent with the history;
             the TTFT of turns after the first is reported on its own (prefix-cache reuse);
             --first-turn-words makes the first turn a long document
  chat       multiturn over a long history: a document of --doc-words opens each conversation,
             short questions (--question-words) follow it, so a later turn is mostly history

  serve_bench.py --url http://127.0.0.1:8080 [--workload random] [--requests 64]
                 [--concurrency 1,4,16] [--model NAME] [--api-key K] [--json OUT.json]
Output tokens are forced with max_tokens and ignore_eos (servers that do not know ignore_eos
may stop early; the counts then come from the usage the server reports).
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import urllib.parse

WORDS = ("the of and to in is was that for on as with by he at from his an were are which this "
         "be or had not but what all when we there can one more if will about out who up so "
         "them some time into only other new could these two may first then do any like my now "
         "over such our man me even most made after also did many before must through back years "
         "where much your way well down should because each just those people how too little "
         "state good very make world still own see men work long get here between both life being "
         "under never day same another know while last might us great old year off come since "
         "against go came right used take three").split()


class Http:
    def __init__(self, url, api_key):
        u = urllib.parse.urlparse(url)
        if u.scheme != "http":
            raise SystemExit("only http:// URLs are supported")
        self.host = u.hostname
        self.port = u.port or 80
        self.prefix = u.path.rstrip("/")
        self.api_key = api_key

    async def request(self, method, path, body=None, on_data=None):
        """Sends one request (Connection: close); on_data(bytes) gets the body as it arrives
        (chunked encoding removed). Returns (status, whole body)."""
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            data = json.dumps(body).encode() if body is not None else b""
            head = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                    "Connection: close", "Accept: */*"]
            if body is not None:
                head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
            if self.api_key:
                head.append(f"Authorization: Bearer {self.api_key}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            await writer.drain()
            status_line = await reader.readline()
            status = int(status_line.split()[1])
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            out = bytearray()

            def take(piece):
                out.extend(piece)
                if on_data:
                    on_data(piece)

            if headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        await reader.readline()
                        break
                    take(await reader.readexactly(size))
                    await reader.readexactly(2)
            elif "content-length" in headers:
                take(await reader.readexactly(int(headers["content-length"])))
            else:
                take(await reader.read())
            return status, bytes(out)
        finally:
            writer.close()


class Result:
    def __init__(self):
        self.ok = False
        self.error = ""
        self.start = self.first = self.end = 0.0
        self.pieces = []  # arrival times of streamed text
        self.output_tokens = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.timings = {}  # the server's own timings of the request, where it sends them
        self.turn = 0

    @property
    def ttft(self):
        return self.first - self.start

    @property
    def e2e(self):
        return self.end - self.start

    @property
    def tpot(self):
        if self.output_tokens < 2:
            return None
        return (self.end - self.first) / (self.output_tokens - 1)


async def chat(http, model, messages, max_tokens, seed):
    r = Result()
    buf = bytearray()
    text = []

    def on_data(piece):
        now = time.perf_counter()
        buf.extend(piece)
        while b"\n\n" in buf:
            event, _, rest = bytes(buf).partition(b"\n\n")
            buf[:] = rest
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    continue
                obj = json.loads(payload)
                if isinstance(obj.get("timings"), dict):
                    r.timings = obj["timings"]
                if obj.get("usage"):
                    u = obj["usage"]
                    r.output_tokens = u.get("completion_tokens", 0)
                    r.prompt_tokens = u.get("prompt_tokens", 0)
                    r.cached_tokens = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                for ch in obj.get("choices", []):
                    d = ch.get("delta", {})
                    piece_text = (d.get("content") or "") + (d.get("reasoning_content") or "")
                    if piece_text or d.get("tool_calls"):
                        if not r.pieces:
                            r.first = now
                        r.pieces.append(now)
                        text.append(d.get("content") or "")

    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0.8,
            "seed": seed}
    r.start = time.perf_counter()
    try:
        status, data = await http.request("POST", "/v1/chat/completions", body, on_data)
        r.end = time.perf_counter()
        if status != 200:
            r.error = f"HTTP {status}: {data[:200]!r}"
        elif not r.pieces:
            r.error = "no text came back"
        else:
            r.ok = True
            if r.output_tokens == 0:
                r.output_tokens = len(r.pieces)
    except (OSError, ValueError, asyncio.IncompleteReadError) as e:
        r.end = time.perf_counter()
        r.error = f"{type(e).__name__}: {e}"
    r.text = "".join(text)
    return r


def prompt_words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_jobs(args, n_requests, rng):
    """A list of async job factories; each returns a list of Results (one per turn)."""
    jobs = []
    for i in range(n_requests):
        if args.workload == "random":
            n_in = rng.randint(*args.input_words)
            n_out = rng.randint(*args.output_tokens)
            messages = [{"role": "user", "content": prompt_words(rng, n_in)}]
            jobs.append(("single", messages, n_out, i))
        elif args.workload == "long":
            messages = [{"role": "user", "content": prompt_words(rng, args.long_words)}]
            jobs.append(("single", messages, args.output_tokens[0], i))
        elif args.workload == "chat":
            turns = [prompt_words(rng, args.doc_words)]
            turns += [prompt_words(rng, rng.randint(*args.question_words))
                      for _ in range(args.turns - 1)]
            jobs.append(("multi", turns, rng.randint(*args.output_tokens), i))
        else:
            turns = [prompt_words(rng, rng.randint(*args.input_words)) for _ in range(args.turns)]
            if args.first_turn_words:  # a long opening (a document), short questions after it
                turns[0] = prompt_words(rng, args.first_turn_words)
            jobs.append(("multi", turns, rng.randint(*args.output_tokens), i))
    return jobs


async def run_job(http, model, job, seed, think=0.0):
    kind, payload, n_out, i = job
    if kind == "single":
        return [await chat(http, model, payload, n_out, seed + i)]
    results = []
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for t, user in enumerate(payload):
        if t > 0 and think > 0:  # the user reads the answer and types the next turn
            await asyncio.sleep(think)
        messages.append({"role": "user", "content": user})
        r = await chat(http, model, messages, n_out, seed + i * 100 + t)
        r.turn = t
        results.append(r)
        if not r.ok:
            break
        messages.append({"role": "assistant", "content": r.text})
    return results


async def run_level(http, model, jobs, concurrency, seed, think=0.0):
    queue = list(jobs)
    results = []

    async def worker():
        while queue:
            job = queue.pop(0)
            results.extend(await run_job(http, model, job, seed, think))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - t0


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "median": None, "p99": None}
    s = sorted(values)
    p99 = s[min(len(s) - 1, max(0, int(round(0.99 * len(s) + 0.5)) - 1))]
    return {"mean": statistics.fmean(s), "median": statistics.median(s), "p99": p99}


def report(results, duration, args):
    ok = [r for r in results if r.ok]
    itl = [b - a for r in ok for a, b in zip(r.pieces, r.pieces[1:])]
    good = [r for r in ok if r.ttft * 1000 <= args.slo_ttft_ms and
            (r.tpot is None or r.tpot * 1000 <= args.slo_tpot_ms)]
    out = {
        "requests": len(results),
        "failed": len(results) - len(ok),
        "duration_s": duration,
        "request_throughput": len(ok) / duration,
        "output_throughput": sum(r.output_tokens for r in ok) / duration,
        "goodput": len(good) / duration,
        "ttft_s": summary([r.ttft for r in ok]),
        "tpot_s": summary([r.tpot for r in ok]),
        "itl_s": summary(itl),
        "e2e_s": summary([r.e2e for r in ok]),
        "prompt_tokens": sum(r.prompt_tokens for r in ok),
        "cached_tokens": sum(r.cached_tokens for r in ok),
    }
    if args.workload in ("multiturn", "chat"):
        out["ttft_first_turn_s"] = summary([r.ttft for r in ok if r.turn == 0])
        out["ttft_later_turns_s"] = summary([r.ttft for r in ok if r.turn > 0])
        # Where a later turn's first token went, as each server reports it (llama-server's
        # timings: prompt_n tokens prefilled in prompt_ms; ours add queue_ms and prepare_ms, the
        # prompt rendered and tokenized): the rest of the TTFT is HTTP, streaming and the client.
        later = [r.timings for r in ok if r.turn > 0]
        out["later_turns_server"] = {
            k: summary([t[k] / 1000 if k.endswith("_ms") else t[k] for t in later if k in t])
            for k in ("prompt_n", "cache_n", "prompt_ms", "queue_ms", "prepare_ms")}
    errors = [r.error for r in results if not r.ok]
    if errors:
        out["first_error"] = errors[0]
    return out


def ms(x):
    return "-" if x is None else f"{x * 1000:.1f}"


def print_table(rows, workload):
    cols = ["conc", "reqs", "fail", "req/s", "tok/s", "good/s", "TTFT mean/med/p99 ms",
            "TPOT mean/med/p99 ms", "ITL mean/med/p99 ms", "E2E mean/med/p99 ms"]
    if workload in ("multiturn", "chat"):
        cols += ["TTFT later turns mean/med/p99 ms",
                 "later turns, server: prefilled tokens / prompt ms / prepare ms (medians)"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for c, r in rows:
        def three(k):
            s = r[k]
            return f"{ms(s['mean'])} / {ms(s['median'])} / {ms(s['p99'])}"
        cells = [str(c), str(r["requests"]), str(r["failed"]), f"{r['request_throughput']:.2f}",
                 f"{r['output_throughput']:.1f}", f"{r['goodput']:.2f}", three("ttft_s"),
                 three("tpot_s"), three("itl_s"), three("e2e_s")]
        if workload in ("multiturn", "chat"):
            cells.append(three("ttft_later_turns_s"))
            srv = r["later_turns_server"]
            n = srv["prompt_n"]["median"]
            cells.append(f"{'-' if n is None else f'{n:.0f}'} / {ms(srv['prompt_ms']['median'])}"
                         f" / {ms(srv['prepare_ms']['median'])}")
        print("| " + " | ".join(cells) + " |")


def int_range(text):
    a, _, b = text.partition(",")
    lo, hi = int(a), int(b or a)
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"'{text}' is not a range LO,HI of positive integers")
    return lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", help="model name (default: the first of GET /v1/models)")
    ap.add_argument("--api-key")
    ap.add_argument("--workload", choices=["random", "long", "multiturn", "chat"], default="random")
    ap.add_argument("--requests", type=int, default=64, help="requests (conversations) per level")
    ap.add_argument("--concurrency", default="1,4,16", help="comma-separated levels")
    ap.add_argument("--input-words", type=int_range, default=(16, 256), metavar="LO,HI")
    ap.add_argument("--output-tokens", type=int_range, default=(16, 128), metavar="LO,HI")
    ap.add_argument("--long-words", type=int, default=2000)
    ap.add_argument("--waves", type=int, default=0,
                    help="at least this many requests per client at each level, so that a high "
                         "level runs full more than once (requests = max(--requests, waves x level))")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--first-turn-words", type=int, default=0,
                    help="multiturn: words of the first turn (default: drawn like the others)")
    ap.add_argument("--doc-words", type=int, default=1500,
                    help="chat: words of the document that opens each conversation")
    ap.add_argument("--question-words", type=int_range, default=(8, 48), metavar="LO,HI",
                    help="chat: words of each later turn")
    ap.add_argument("--think-ms", type=float, default=0,
                    help="multiturn, chat: a pause before each later turn (a person reading and "
                         "typing; not in its TTFT, but in the level's time and rates)")
    ap.add_argument("--slo-ttft-ms", type=float, default=1000)
    ap.add_argument("--slo-tpot-ms", type=float, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0,
                    help="requests sent (at that many at once, up to the highest level) before the "
                         "first level and not measured: a server's pipelines and commands made on "
                         "first use; their prompts share no prefix with the measured ones")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if not levels or min(levels) < 1:
        ap.error("--concurrency needs positive integers")
    http = Http(args.url, args.api_key)

    def write_json(model, rows):
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"model": model, "url": args.url, "workload": args.workload,
                           "args": {k: v for k, v in vars(args).items() if k != "api_key"},
                           "levels": [{"concurrency": c, **r} for c, r in rows]}, f, indent=1)

    async def go():
        model = args.model
        if not model:
            status, data = await http.request("GET", "/v1/models")
            if status != 200:
                raise SystemExit(f"GET /v1/models: HTTP {status}")
            model = json.loads(data)["data"][0]["id"]
        if args.warmup > 0:
            jobs = make_jobs(args, args.warmup, random.Random(args.seed + 7919))
            _, duration = await run_level(http, model, jobs, min(args.warmup, max(levels)),
                                          args.seed + 7919)
            print(f"warm-up: {args.warmup} requests in {duration:.2f} s", file=sys.stderr)
        rows = []
        for c in levels:
            # Each level its own prompts: a server's cache of an earlier level's prompts (a
            # document both levels send) would make the later level's first turns look fast.
            jobs = make_jobs(args, max(args.requests, args.waves * c),
                             random.Random(args.seed + 1009 * c))
            results, duration = await run_level(http, model, jobs, c, args.seed,
                                                args.think_ms / 1000)
            rows.append((c, report(results, duration, args)))
            print(f"concurrency {c}: {rows[-1][1]['requests']} requests in {duration:.2f} s",
                  file=sys.stderr)
            write_json(model, rows)  # the levels done so far, should the run be cut
        return model, rows

    model, rows = asyncio.run(go())
    print(f"{args.workload} workload on {model} at {args.url}\n")
    print_table(rows, args.workload)
    failed = sum(r["failed"] for _, r in rows)
    if failed:
        print(f"{failed} requests failed; the first: "
              f"{next(r['first_error'] for _, r in rows if r['failed'])}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
