#!/usr/bin/env python3
"""The machine code the NVIDIA driver compiled for each pipeline, read from a pipeline cache.

    scripts/vk/sass.py CACHE STATS OUTDIR [--arch SM90]

CACHE is the file deltallm's pipeline cache writes (DELTALLM_PIPELINE_CACHE=DIR), STATS a log of
the same run with DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 (its "kernel NAME [spec]: ...
Binary Size N" lines name the entries). For each entry OUTDIR gets NN_NAME.bin (the raw machine
code) and, where nvdisasm is installed, NN_NAME.sass; stdout gets one line an entry with its
instruction counts.

The driver returns no disassembly through VK_KHR_pipeline_executable_properties, but its cache
holds each pipeline as a zstd frame whose payload starts with "NVDANVVMNVuc" and whose record at
byte 0x48 gives the code's size and offset (code at offset + 8). That layout is the driver's own
and undocumented: an entry that does not fit it is reported and skipped, never guessed at.
Needs the zstd command (the device pack carries one).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys

FRAME = b"\x28\xb5\x2f\xfd"  # zstd frame magic
MAGIC = b"NVDANVVMNVuc"
NOP = bytes.fromhex("1879000000000000")  # the low half of an sm_70+ NOP


def entries(cache, zstd):
    starts = []
    i = cache.find(FRAME)
    while i >= 0:
        starts.append(i)
        i = cache.find(FRAME, i + 4)
    for n, s in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(cache)
        r = subprocess.run([zstd, "-d", "-q", "-c"], input=cache[s:end], capture_output=True)
        if r.stdout.startswith(MAGIC):  # a magic inside a frame's data decodes to nothing
            yield r.stdout


def code_of(entry):
    kind, size, off = struct.unpack_from("<III", entry, 0x48)
    code = entry[off + 8 : off + 8 + size]
    if kind != 1 or size == 0 or size % 16 or len(code) != size or code[-16:-8] != NOP:
        return None
    return code


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache")
    ap.add_argument("stats")
    ap.add_argument("outdir")
    ap.add_argument("--arch", default="SM90", help="nvdisasm's -b value (the device's SM)")
    a = ap.parse_args()
    zstd = shutil.which("zstd") or os.environ.get("ZSTD", "")
    if not zstd:
        sys.exit("error: sass.py needs the zstd command")
    by_size = {}
    with open(a.stats, errors="replace") as f:
        for line in f:
            m = re.search(r"kernel (\S+) \[([^\]]*)\]: Register Count (\d+), Binary Size (\d+)", line)
            if m:
                name = m.group(1) + "[" + m.group(2).replace(" ", "") + "]"
                by_size.setdefault(int(m.group(4)), {})[name] = int(m.group(3))
    with open(a.cache, "rb") as f:
        cache = f.read()
    os.makedirs(a.outdir, exist_ok=True)
    nvdisasm = shutil.which("nvdisasm")
    for n, e in enumerate(entries(cache, zstd)):
        code = code_of(e)
        if code is None:
            print(f"{n:02d} not in the known layout, skipped")
            continue
        names = by_size.get(len(code), {})
        label = " | ".join(f"{k} ({r} registers)" for k, r in sorted(names.items())) or "?"
        base = os.path.join(a.outdir, f"{n:02d}_" + re.sub(r"[^\w.,@-]+", "_", min(names, default="unnamed"))[:80])
        with open(base + ".bin", "wb") as f:
            f.write(code)
        counts = ""
        if nvdisasm:
            r = subprocess.run([nvdisasm, "-b", a.arch, base + ".bin"], capture_output=True, text=True)
            with open(base + ".sass", "w") as f:
                f.write(r.stdout + r.stderr)
            ops = re.findall(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", r.stdout, re.M)
            c = {k: sum(o == k for o in ops) for k in ("LDG", "LDS", "STS", "BAR", "IDP", "FFMA", "SHFL")}
            counts = f", {len(ops)} instructions, " + ", ".join(f"{k} {v}" for k, v in c.items())
        print(f"{n:02d} {len(code)} bytes{counts}: {label}")


if __name__ == "__main__":
    main()
