#!/usr/bin/env python3
"""Zero the built-in model's bytes inside a deltallm binary: usage zero_builtin_model.py BINARY MODEL.

The built-in model (13.8 MB that xz barely shrinks) travels in the tree already; zeroed, the
binary packed for the GPU machine compresses to a tenth. There the benchmarks run their own
files, and the built-in model is given as -m models/*.gguf."""
import sys

binary, model = sys.argv[1], sys.argv[2]
data, blob = bytearray(open(binary, "rb").read()), open(model, "rb").read()
at = data.find(blob)
if at < 0 or data.find(blob, at + 1) >= 0:
    sys.exit(f"{sys.argv[0]}: the built-in model is not in {binary} exactly once")
data[at:at + len(blob)] = bytes(len(blob))
open(binary, "wb").write(data)
