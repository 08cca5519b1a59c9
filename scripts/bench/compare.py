#!/usr/bin/env python3
"""Runs deltallm bench and the llama.cpp peer (bench/peer_bench.cpp) on the same GGUF files,
alternating engines round by round in one session so that a change in machine load hits both,
and prints per-test ratios (deltallm / llama.cpp) next to the floors deltallm measured.

First checks that llama.cpp loads every file: a file it refuses means our GGUF writer is wrong,
and the run stops with that message.

  compare.py -m a.gguf [-m b.gguf] [-p 128] [-n 32] [-d 0,4096] [-b 1,8,32] [-r 3] [--rounds 2] [-t 2] [--device cpu]
      [--peer-device cuda]   (the peer's backend when it is not ours: llama.cpp's CUDA build)
  compare.py -m a.gguf --sweep [--sweep-lengths 128,256,...] --csv sweep.csv
Writes a markdown table to stdout (and --md FILE), the pooled results to --json FILE, and for a
sweep the CSV that plot.py draws. -d runs every test again at each depth (D random tokens in the
context first, not timed; rows "tg128 @ d4096"), in both programs.
-b 1,8,32 adds both programs' batched rows (llama-batched-bench's semantics: B sequences, their
prompts in one step, then -n steps of one token of each; aggregate t/s) and a second table of
prompt and generation rates, ours, llama.cpp and their ratio; their pooled results go to
--batched-json and --batched-csv (the single-stream outputs keep their form).
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_json(cmd, env=None):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"compare: command failed ({p.returncode}): {' '.join(cmd)}")
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"compare: no JSON from: {' '.join(cmd)}")
    out["_wall_s"] = time.time() - t0
    return out


def mean_sd(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def load_avg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", action="append", required=True, help="GGUF file (repeatable)")
    ap.add_argument("-p", default="512", help="prompt lengths, e.g. 128,512")
    ap.add_argument("-n", default="128", help="generation lengths, e.g. 32")
    ap.add_argument("-d", default="0", help="context depths, e.g. 0,4096 (tokens before each test)")
    ap.add_argument("-b", default="", help="batched rows for these sequence counts, e.g. 1,8,32")
    ap.add_argument("--peer-ubatch", type=int, default=0,
                    help="with -b: llama.cpp's physical batch (peer_bench -ub; default 512, llama.cpp's)")
    ap.add_argument("-r", type=int, default=3, help="timed repetitions per engine per round")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (ours, peer, ours, ...)")
    ap.add_argument("-t", "--threads", type=int, default=0, help="CPU threads for both engines")
    ap.add_argument("--device", default="cpu", choices=["cpu", "vulkan"])
    ap.add_argument("--peer-device", default="", choices=["", "cpu", "vulkan", "cuda"],
                    help="the peer's backend when it differs from ours (cuda: llama.cpp's CUDA build)")
    ap.add_argument("--bw-gbps", type=float, default=0, help="memory bandwidth for the tg floor")
    ap.add_argument("--peak-gflops", type=float, default=0, help="peak FLOP rate for the pp floor")
    ap.add_argument("--ours", default=os.path.join(REPO, "build-bench", "deltallm"))
    ap.add_argument("--peer", default="", help="peer_bench binary (default build-peer/<device>/peer_bench)")
    ap.add_argument("--sweep", action="store_true", help="prompt-length sweep (pp only) into --csv")
    ap.add_argument("--sweep-lengths", default="128,256,512,1024,2048,4096,8192")
    ap.add_argument("--csv", default="", help="write per-test rows of both engines here")
    ap.add_argument("--md", default="", help="write the table here too")
    ap.add_argument("--json", default="", help="write the pooled results here")
    ap.add_argument("--batched-json", default="", help="with -b: the pooled batched results here")
    ap.add_argument("--batched-csv", default="", help="with -b: the batched rows of both engines here")
    a = ap.parse_args()
    peer_device = a.peer_device or a.device
    peer = a.peer or os.path.join(REPO, "build-peer", peer_device, "peer_bench")
    for exe in (a.ours, peer):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"compare: {exe} is missing: build it first (see docs/PERF.md)")
    prompts, gens = a.p, a.n
    try:
        depths = [int(x) for x in a.d.split(",")]
    except ValueError:
        raise SystemExit(f"compare: -d wants comma-separated depths, not '{a.d}'")
    if any(d < 0 for d in depths):
        raise SystemExit(f"compare: -d: depths must be 0 or more, not '{a.d}'")
    show_depth = any(d > 0 for d in depths)
    if a.sweep:
        prompts, gens = a.sweep_lengths, "0"
    if a.b:
        try:
            if any(int(x) < 1 for x in a.b.split(",")):
                raise ValueError
        except ValueError:
            raise SystemExit(f"compare: -b wants comma-separated sequence counts of 1 or more, not '{a.b}'")
        if a.sweep:
            raise SystemExit("compare: -b and --sweep do not go together")

    # 1. llama.cpp must load every file.
    for m in a.model:
        p = subprocess.run([peer, "-m", m, "--device", peer_device, "--load-only"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0 and p.returncode != 2:
            sys.stderr.write(p.stderr)
            raise SystemExit(f"compare: the peer program failed (exit {p.returncode}) on {m}")
        if p.returncode == 2:  # peer_bench's exit code for "llama.cpp could not load the file"
            sys.stderr.write(p.stderr)
            sys.stderr.write("\n" + "!" * 78 + "\n")
            sys.stderr.write(f"!!! llama.cpp REFUSES {m}: our GGUF writer produced a file the\n"
                             f"!!! reference reader rejects. This is a bug in deltallm; see above.\n")
            sys.stderr.write("!" * 78 + "\n")
            raise SystemExit(3)

    common = ["-p", prompts, "-n", gens, "-r", str(a.r), "-o", "json"]
    if show_depth:
        common += ["-d", a.d]
    if a.b:
        common += ["-b", a.b]
    floors = []
    if a.bw_gbps > 0:
        floors += ["--bw-gbps", str(a.bw_gbps)]
    if a.peak_gflops > 0:
        floors += ["--peak-gflops", str(a.peak_gflops)]
    results = []
    batched = []
    for m in a.model:
        ours_cmd = ([a.ours] + (["-t", str(a.threads)] if a.threads else []) + ["bench", "-m", m] + common
                    + ["--device", a.device] + floors)
        peer_cmd = ([peer, "-m", m] + common + ["--device", peer_device] + floors
                    + (["-t", str(a.threads)] if a.threads else [])
                    + (["-ub", str(a.peer_ubatch)] if a.b and a.peer_ubatch > 0 else []))
        samples = {"deltallm": {}, "llama.cpp": {}}
        # Batched rows: test -> {"pp": [...], "tg": [...]} per engine.
        bsamples = {"deltallm": {}, "llama.cpp": {}}
        meta = {}
        loads = []
        for rnd in range(a.rounds):
            order = [("deltallm", ours_cmd), ("llama.cpp", peer_cmd)]
            if rnd % 2 == 1:
                order.reverse()  # neither engine always runs first
            for engine, cmd in order:
                loads.append(load_avg())
                sys.stderr.write(f"compare: round {rnd + 1}/{a.rounds} {engine} on {os.path.basename(m)} "
                                 f"(load {loads[-1]:.1f})\n")
                out = run_json(cmd)
                meta[engine] = out
                for row in out["rows"]:
                    samples[engine].setdefault(row["test"], []).extend(row["samples_ts"])
                for row in out.get("batched_rows", []):
                    b = bsamples[engine].setdefault(row["test"], {"pp": [], "tg": []})
                    b["pp"].extend(row["pp_samples_ts"])
                    b["tg"].extend(row["tg_samples_ts"])
        ours_rows = {r["test"]: r for r in meta["deltallm"]["rows"]}
        for test in samples["deltallm"]:
            om, osd = mean_sd(samples["deltallm"][test])
            pm, psd = mean_sd(samples["llama.cpp"][test])
            r = ours_rows[test]
            results.append({
                "model": os.path.basename(m), "device": a.device, "peer_device": peer_device, "test": test,
                "n_prompt": r["n_prompt"], "n_gen": r["n_gen"], "n_depth": r.get("n_depth", 0),
                "threads": meta["deltallm"]["threads"],
                "ours_ts": om, "ours_sd": osd, "peer_ts": pm, "peer_sd": psd,
                "ratio": om / pm if pm > 0 else float("nan"),
                "ceiling_ts": r["ceiling_ts"], "floor_kind": r["floor_kind"],
                "ours_samples": samples["deltallm"][test], "peer_samples": samples["llama.cpp"][test],
                "load_min": min(loads), "load_max": max(loads),
                "bandwidth_gbps": meta["deltallm"]["bandwidth_gbps"],
                "peak_gflops": meta["deltallm"]["peak_gflops"],
                "peer_system_info": meta["llama.cpp"].get("system_info", ""),
                "ours_device_name": meta["deltallm"]["device"],
            })
        ours_brows = {r["test"]: r for r in meta["deltallm"].get("batched_rows", [])}
        for test, ob in bsamples["deltallm"].items():
            pb = bsamples["llama.cpp"].get(test)
            if pb is None:
                raise SystemExit(f"compare: the peer has no batched row {test}: rebuild build-peer")
            r = ours_brows[test]
            row = {"model": os.path.basename(m), "device": a.device, "peer_device": peer_device, "test": test,
                   "n_seq": r["n_seq"], "n_prompt": r["n_prompt"], "n_gen": r["n_gen"],
                   "threads": meta["deltallm"]["threads"], "tg_ceiling_ts": r["tg_ceiling_ts"],
                   "load_min": min(loads), "load_max": max(loads),
                   "ours_device_name": meta["deltallm"]["device"],
                   "peer_n_ubatch": meta["llama.cpp"].get("batched_n_ubatch", 0),
                   "peer_kv_unified": meta["llama.cpp"].get("kv_unified", False)}
            for kind in ("pp", "tg"):
                if ob[kind] and pb[kind]:
                    om, osd = mean_sd(ob[kind])
                    pm, psd = mean_sd(pb[kind])
                else:  # no prompt (-p 0) or no generation (-n 0) in this row
                    om = osd = pm = psd = float("nan")
                row.update({f"ours_{kind}_ts": om, f"ours_{kind}_sd": osd, f"peer_{kind}_ts": pm,
                            f"peer_{kind}_sd": psd, f"{kind}_ratio": om / pm if pm > 0 else float("nan"),
                            f"ours_{kind}_samples": ob[kind], f"peer_{kind}_samples": pb[kind]})
            batched.append(row)

    # A depth column only when a depth was asked for, so tables without one keep their form.
    dh, dr = ("depth | ", "---: | ") if show_depth else ("", "")
    # The peer's backend is named only where it is not ours (llama.cpp's CUDA build beside our Vulkan).
    peer_name = "llama.cpp" if peer_device == a.device else f"llama.cpp {peer_device}"
    lines = [f"| model | device | threads | test | {dh}deltallm t/s | {peer_name} t/s | ratio | ceiling t/s | load |",
             f"| --- | --- | ---: | ---: | {dr}---: | ---: | ---: | ---: | --- |"]
    for r in results:
        ceil = f"{r['ceiling_ts']:.1f} ({r['floor_kind']})" if r["ceiling_ts"] > 0 else "-"
        depth = f"{r['n_depth']} | " if show_depth else ""
        lines.append(f"| {r['model']} | {r['ours_device_name']} | {r['threads']} | {r['test']} | {depth}"
                     f"{r['ours_ts']:.2f} ± {r['ours_sd']:.2f} | {r['peer_ts']:.2f} ± {r['peer_sd']:.2f} | "
                     f"{r['ratio']:.3f} | {ceil} | {r['load_min']:.1f}-{r['load_max']:.1f} |")
    table = "\n".join(lines) + "\n"
    if batched:
        def cell(r, key):
            m, sd = r[f"{key}_ts"], r[f"{key}_sd"]
            return "-" if math.isnan(m) else f"{m:.2f} ± {sd:.2f}"

        def ratio(x):
            return "-" if math.isnan(x) else f"{x:.3f}"
        lines = [f"| model | device | threads | test | deltallm pp t/s | {peer_name} pp t/s | pp ratio | "
                 f"deltallm tg t/s | {peer_name} tg t/s | tg ratio | tg ceiling t/s | load |",
                 "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in batched:
            ceil = f"{r['tg_ceiling_ts']:.1f}" if r["tg_ceiling_ts"] > 0 else "-"
            lines.append(f"| {r['model']} | {r['ours_device_name']} | {r['threads']} | {r['test']} | "
                         f"{cell(r, 'ours_pp')} | {cell(r, 'peer_pp')} | {ratio(r['pp_ratio'])} | "
                         f"{cell(r, 'ours_tg')} | {cell(r, 'peer_tg')} | {ratio(r['tg_ratio'])} | {ceil} | "
                         f"{r['load_min']:.1f}-{r['load_max']:.1f} |")
        table += "\n" + "\n".join(lines) + "\n"
    sys.stdout.write(table)
    if a.md:
        with open(a.md, "w") as f:
            f.write(table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "device", "test", "n_prompt", "n_gen"] + (["n_depth"] if show_depth else [])
                       + ["ours_ts", "ours_sd", "peer_ts", "peer_sd", "ratio", "ceiling_ts"])
            for r in results:
                w.writerow([r["model"], r["device"], r["test"], r["n_prompt"], r["n_gen"]]
                           + ([r["n_depth"]] if show_depth else [])
                           + [f"{r['ours_ts']:.3f}", f"{r['ours_sd']:.3f}", f"{r['peer_ts']:.3f}",
                              f"{r['peer_sd']:.3f}", f"{r['ratio']:.4f}", f"{r['ceiling_ts']:.3f}"])
    if a.batched_json:
        # A rate a row does not have (no prompt or no generation) is null, not NaN.
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                 for r in batched]
        with open(a.batched_json, "w") as f:
            json.dump(clean, f, indent=2)
    if a.batched_csv:
        with open(a.batched_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "device", "test", "n_seq", "n_prompt", "n_gen", "ours_pp_ts", "peer_pp_ts",
                        "pp_ratio", "ours_tg_ts", "peer_tg_ts", "tg_ratio", "tg_ceiling_ts"])
            for r in batched:
                w.writerow([r["model"], r["device"], r["test"], r["n_seq"], r["n_prompt"], r["n_gen"]]
                           + [f"{r[k]:.3f}" for k in ("ours_pp_ts", "peer_pp_ts")] + [f"{r['pp_ratio']:.4f}"]
                           + [f"{r[k]:.3f}" for k in ("ours_tg_ts", "peer_tg_ts")] + [f"{r['tg_ratio']:.4f}"]
                           + [f"{r['tg_ceiling_ts']:.3f}"])


if __name__ == "__main__":
    main()
