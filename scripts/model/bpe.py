#!/usr/bin/env python3
# The byte-level BPE tokenizer of the project's own model: trains about 8k tokens on the corpus
# (scripts/model/corpus.sh) and writes a Hugging Face tokenizer.json (BPE with vocab and merges,
# the Qwen3.5 Split regex and ByteLevel pre-tokenizer, ByteLevel decoder, NFC normalizer) and a
# tokenizer_config.json with the special tokens and chat template a Qwen3.5 chat needs, so that
# `deltallm convert` imports it (GGUF pre "qwen35") and transformers loads it. Text is split before
# BPE with exactly the regex the engine uses for "qwen35" (src/tokenizer/pretokenize.cpp): the
# contractions spelled case by case and \s as Unicode White_Space, which is what the Qwen3.5
# pattern written into tokenizer.json means there.
#
#   bpe.py train --corpus build/corpus/train.jsonl --out scripts/model   (tokenizer.json + config)
#   bpe.py encode --tokenizer scripts/model/tokenizer.json < text        (ids, comma separated)
#   bpe.py sample --tokenizer ... --heldout build/corpus/heldout.jsonl --out SAMPLE.json
#   bpe.py tokenize --tokenizer ... --corpus build/corpus/train.jsonl --out train.u16
#
# Debian's python3 and python3-regex only (no PyPI).
import argparse
import array
import heapq
import json
import os
import sys
import unicodedata
from collections import Counter, defaultdict

import regex

VOCAB_SIZE = 8192
# Qwen3.5's control tokens for chat (ChatML turns, thinking, tool calls), after the BPE tokens.
SPECIAL = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<think>", False),
    ("</think>", False),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
]

# The pattern as Qwen3.5's tokenizer.json writes it.
HF_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
              r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# The same as the engine runs it (pretokenize.cpp kQwen35 with \s and \S rewritten).
_WS = r"\t-\r\x20\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
ENGINE_PATTERN = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                  r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^" + _WS + r"\p{L}\p{M}\p{N}]+[\r\n]*|[" + _WS + r"]*[\r\n]+"
                  r"|[" + _WS + r"]+(?![^" + _WS + r"])|[" + _WS + r"]+")
SPLIT = regex.compile(ENGINE_PATTERN)


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters (what ByteLevel means)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def pieces(text):
    """NFC, then the pre-tokenizer's pieces as byte-level strings."""
    text = unicodedata.normalize("NFC", text)
    return ["".join(B2U[b] for b in p.encode("utf-8")) for p in SPLIT.findall(text)]


def train(texts, n_merges, log=sys.stderr):
    words = Counter()
    for t in texts:
        words.update(pieces(t))
    syms = [list(w) for w in words]
    counts = list(words.values())
    pair_count = defaultdict(int)
    where = defaultdict(set)
    for i, s in enumerate(syms):
        for a, b in zip(s, s[1:]):
            pair_count[(a, b)] += counts[i]
            where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if -c != pair_count.get(p, 0) or -c <= 0:
            continue  # stale entry
        merges.append(p)
        a, b = p
        ab = a + b
        touched = set()
        for i in list(where[p]):
            s = syms[i]
            n = counts[i]
            j = 0
            out = []
            changed = False
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(ab)
                    j += 2
                    changed = True
                else:
                    out.append(s[j])
                    j += 1
            if not changed:
                continue
            for x, y in zip(s, s[1:]):
                pair_count[(x, y)] -= n
                touched.add((x, y))
                where[(x, y)].discard(i)
            for x, y in zip(out, out[1:]):
                pair_count[(x, y)] += n
                touched.add((x, y))
                where[(x, y)].add(i)
            syms[i] = out
        for q in touched:
            if pair_count.get(q, 0) > 0:
                heapq.heappush(heap, (-pair_count[q], q))
        pair_count.pop(p, None)
        if len(merges) % 1000 == 0:
            print("bpe: %d merges" % len(merges), file=log)
    return merges


class Encoder:
    """The trainer's own encoder: merges applied by rank within each pre-tokenized piece."""

    def __init__(self, tok):
        self.vocab = tok["model"]["vocab"]
        self.rank = {tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m): r
                     for r, m in enumerate(tok["model"]["merges"])}
        self.special = {t["content"]: t["id"] for t in tok["added_tokens"]}
        self.cache = {}

    def piece(self, p):
        s = list(p)
        while len(s) > 1:
            best = None
            for k in range(len(s) - 1):
                r = self.rank.get((s[k], s[k + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, k)
            if best is None:
                break
            k = best[1]
            s[k:k + 2] = [s[k] + s[k + 1]]
        return [self.vocab[x] for x in s]

    def encode(self, text):
        ids = []
        cache = self.cache
        for p in pieces(text):
            got = cache.get(p)
            if got is None:
                got = cache[p] = self.piece(p)
            ids.extend(got)
        return ids


def chat_template():
    # ChatML turns as Qwen models write them; an assistant turn may open with a thinking block.
    return ("{%- for message in messages %}"
            "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
            "{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def write_tokenizer(merges, out_dir):
    vocab = {}
    for b in range(256):
        vocab[B2U[b]] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = []
    for content, special in SPECIAL:
        added.append({"id": len(vocab) + len(added), "content": content, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False, "special": special})
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": HF_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
    cfg = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 4096,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "added_tokens_decoder": {str(t["id"]): {k: t[k] for k in t if k != "id"} for t in added},
        "chat_template": chat_template(),
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    return tok


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--corpus", required=True, help="train.jsonl from corpus.py")
    t.add_argument("--out", required=True)
    t.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    e = sub.add_parser("encode")
    e.add_argument("--tokenizer", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--tokenizer", required=True)
    s.add_argument("--heldout", required=True, help="heldout.jsonl from corpus.py")
    s.add_argument("--out", required=True)
    s.add_argument("--chars", type=int, default=1500, help="of each source's first document")
    k = sub.add_parser("tokenize")
    k.add_argument("--tokenizer", required=True)
    k.add_argument("--corpus", required=True, help="a .jsonl from corpus.py, or a .txt")
    k.add_argument("--out", required=True, help="token ids, uint16 little-endian")
    a = ap.parse_args()
    if a.cmd == "train":
        texts = (r["text"] for r in read_jsonl(a.corpus))
        merges = train(texts, a.vocab_size - 256 - len(SPECIAL))
        tok = write_tokenizer(merges, a.out)
        print("bpe: %d tokens (%d merges, %d special) in %s/tokenizer.json" %
              (len(tok["model"]["vocab"]) + len(SPECIAL), len(merges), len(SPECIAL), a.out))
    elif a.cmd == "encode":
        with open(a.tokenizer, encoding="utf-8") as f:
            enc = Encoder(json.load(f))
        print(",".join(map(str, enc.encode(sys.stdin.read()))))
    elif a.cmd == "tokenize":
        # The training stream: every document's ids followed by <|endoftext|>, as the model
        # sees a document boundary.
        with open(a.tokenizer, encoding="utf-8") as f:
            enc = Encoder(json.load(f))
        eot = enc.special["<|endoftext|>"]
        assert max(enc.vocab.values()) < 65536 and eot < 65536
        out = array.array("H")
        if a.corpus.endswith(".txt"):  # one text, as `deltallm perplexity -f` tokenizes it
            with open(a.corpus, encoding="utf-8") as f:
                out.extend(enc.encode(f.read()))
        else:
            for r in read_jsonl(a.corpus):
                out.extend(enc.encode(r["text"]))
                out.append(eot)
        if sys.byteorder != "little":
            out.byteswap()
        with open(a.out, "wb") as f:
            out.tofile(f)
        print("bpe: %d tokens in %s" % (len(out), a.out))
    else:
        with open(a.tokenizer, encoding="utf-8") as f:
            enc = Encoder(json.load(f))
        seen = set()
        cases = []
        for r in read_jsonl(a.heldout):
            if r["source"] in seen:
                continue
            seen.add(r["source"])
            text = r["text"][:a.chars]
            cases.append({"source": r["source"], "doc": r["doc"], "text": text,
                          "ids": enc.encode(text)})
        # Text the corpus lacks: other scripts, combining marks, digits, odd spacing.
        extra = "Café naïve coöperate — “quoted” 1234567 x\u0301y  tabs\tand\r\nCRLF  \n\n\n ünïcödé 日本語 Ελληνικά ok?!"
        cases.append({"source": "edge", "doc": "edge", "text": extra, "ids": enc.encode(extra)})
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"tokenizer": "scripts/model/tokenizer.json", "cases": cases}, f,
                      ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
