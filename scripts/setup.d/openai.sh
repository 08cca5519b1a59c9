#!/usr/bin/env bash
# The official OpenAI client for JavaScript: the server's end-to-end tests (tests/server) drive
# `deltallm serve` with it, unchanged.
exec bash "$(dirname "$0")/../npm_pinned.sh" openai 6.30.1 "the server's client tests"
