#!/usr/bin/env python3
"""Starts `deltallm serve` (the built-in model, a key, metrics; one with a template that opens a
thinking block, and the same without next-turn warm-ups; one with Qwen3.5's template, which shows
the model its tools) and runs openai_client.cjs against them: the official OpenAI client for
JavaScript, installed by scripts/setup.d/openai.sh."""
import os
import pathlib
import subprocess
import sys

from harness import Server, binary_from_argv

ROOT = pathlib.Path(__file__).resolve().parents[3]


def main():
    binary = binary_from_argv()
    npm = ROOT / ".cache" / "npm"
    if not (npm / "node_modules" / "openai" / "package.json").exists():
        print(f"the openai npm package is not in {npm}: run scripts/setup.sh "
              "(scripts/setup.d/openai.sh)")
        print("0 passed, 1 failed")
        return 1
    thinking = pathlib.Path(__file__).with_name("thinking.jinja")
    qwen35 = ROOT / "tests" / "data" / "templates" / "Qwen-Qwen3.5.jinja"
    with Server(binary, "--api-key", "sk-test", "--metrics", "--parallel", 2) as srv, \
            Server(binary, "--chat-template-file", thinking, "--alias", "thinker",
                   "--metrics") as think, \
            Server(binary, "--chat-template-file", thinking, "--alias", "thinker",
                   "--no-warm-next-turn") as cold, \
            Server(binary, "--chat-template-file", qwen35, "--alias", "qwen35") as tools:
        env = dict(os.environ, DELTALLM_URL=f"http://127.0.0.1:{srv.port}", DELTALLM_KEY="sk-test",
                   DELTALLM_BIN=binary, DELTALLM_MODEL="deltallm-tiny", DELTALLM_NPM_DIR=str(npm),
                   DELTALLM_THINK_URL=f"http://127.0.0.1:{think.port}",
                   DELTALLM_COLD_THINK_URL=f"http://127.0.0.1:{cold.port}",
                   DELTALLM_TOOLS_URL=f"http://127.0.0.1:{tools.port}")
        rc = subprocess.run(["node", str(pathlib.Path(__file__).with_name("openai_client.cjs"))],
                            env=env, timeout=110).returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
