#!/usr/bin/env python3
"""scripts/bench/serve_bench.py runs each workload against `deltallm serve` and reports every
request as done (a small run: it checks the tool, not the speed)."""
import json
import pathlib
import subprocess
import sys
import tempfile

from harness import Checks, Server, binary_from_argv

BENCH = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "bench" / "serve_bench.py"


def main():
    checks = Checks()
    with Server(binary_from_argv(), "--parallel", 2) as srv, tempfile.TemporaryDirectory() as tmp:
        def workload(name):
            out = pathlib.Path(tmp) / f"{name}.json"
            p = subprocess.run(
                [sys.executable, str(BENCH), "--url", f"http://127.0.0.1:{srv.port}",
                 "--workload", name, "--requests", "3", "--concurrency", "1,2",
                 "--input-words", "4,24", "--output-tokens", "2,8", "--long-words", "200",
                 "--turns", "2", "--doc-words", "120", "--question-words", "3,8",
                 "--json", str(out)],
                capture_output=True, text=True, timeout=100)
            assert p.returncode == 0, p.stdout + p.stderr
            assert "| conc |" in p.stdout, p.stdout
            res = json.loads(out.read_text())
            for level in res["levels"]:
                assert level["failed"] == 0, level
                assert level["ttft_s"]["mean"] > 0 and level["e2e_s"]["p99"] > 0, level
                assert level["output_throughput"] > 0, level
            assert [l["concurrency"] for l in res["levels"]] == [1, 2], res["levels"]
            if name in ("multiturn", "chat"):
                # Each level sends its own conversations: the second turns restore their history.
                for level in res["levels"]:
                    assert level["cached_tokens"] > 0, level
                    assert level["ttft_later_turns_s"]["median"] > 0, level
                    # The server's own timings of those turns: fewer tokens prefilled than the
                    # history holds, and the prefill's time within the client's TTFT.
                    t = level["later_turns_server"]
                    assert t["cache_n"]["median"] > t["prompt_n"]["median"] > 0, t
                    assert 0 < t["prompt_ms"]["median"] < level["ttft_later_turns_s"]["p99"], t
                    assert t["prepare_ms"]["median"] > 0, t

        for name in ("random", "long", "multiturn", "chat"):
            checks.run(f"the {name} workload runs and reports", workload, name)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
