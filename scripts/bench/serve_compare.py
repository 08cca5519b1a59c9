#!/usr/bin/env python3
"""One Markdown table from serve_bench.py results of deltallm and llama-server on the same
workload: per concurrency level, output tokens/s, TTFT and TPOT (median) of each engine and the
ratio (ours / peer for throughput, peer / ours for latencies, so above 1 is better for us).

  serve_compare.py DIR/serve-deltallm-random.json ... --peer-dir DIR [--png-dir DIR]
(the peer's file for serve-deltallm-W.json is serve-llama-server-W.json in --peer-dir). With
--png-dir, serve-W.png per workload: output tokens/s and median TTFT against concurrency, both
engines (matplotlib, where it is installed)."""
import argparse
import json
import os


def load(path):
    with open(path) as f:
        return json.load(f)


def cell(x, scale=1.0, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x * scale)


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def plot(path, ours, peer):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {path} not drawn)")
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, run, style in (("deltallm", ours, "o-"), ("llama-server", peer, "s--")):
        lv = sorted(run["levels"], key=lambda x: x["concurrency"])
        if not lv:
            continue
        c = [x["concurrency"] for x in lv]
        ax1.plot(c, [x["output_throughput"] for x in lv], style, label=name)
        ax2.plot(c, [(x["ttft_s"]["median"] or 0) * 1000 for x in lv], style, label=name)
    for ax, title in ((ax1, "output tokens/s"), (ax2, "median TTFT (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent requests")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{ours['workload']} workload, {os.path.basename(ours['model'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours", nargs="+")
    ap.add_argument("--peer-dir", required=True)
    ap.add_argument("--png-dir", default="")
    a = ap.parse_args()
    for path in a.ours:
        ours = load(path)
        peer_path = os.path.join(a.peer_dir, os.path.basename(path).replace("deltallm", "llama-server"))
        peer = load(peer_path) if os.path.exists(peer_path) else {"levels": []}
        by_c = {lv["concurrency"]: lv for lv in peer["levels"]}
        print(f"### {ours['workload']} workload, {os.path.basename(ours['model'])}\n")
        multi = ours["workload"] == "multiturn"
        cols = ["concurrency", "tok/s ours", "tok/s llama-server", "ratio", "TTFT ms ours (median)",
                "TTFT ms peer", "ratio", "TPOT ms ours (median)", "TPOT ms peer", "ratio"]
        if multi:
            cols += ["later-turn TTFT ms ours", "peer", "ratio"]
        cols.append("failed ours/peer")
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for lv in ours["levels"]:
            c = lv["concurrency"]
            p = by_c.get(c, {})
            pt = p.get("ttft_s", {}).get("median")
            pp = p.get("tpot_s", {}).get("median")
            cells = [str(c), f"{lv['output_throughput']:.1f}", cell(p.get("output_throughput")),
                     ratio(lv["output_throughput"], p.get("output_throughput")),
                     cell(lv["ttft_s"]["median"], 1000), cell(pt, 1000),
                     ratio(pt, lv["ttft_s"]["median"]),
                     cell(lv["tpot_s"]["median"], 1000, "{:.2f}"), cell(pp, 1000, "{:.2f}"),
                     ratio(pp, lv["tpot_s"]["median"])]
            if multi:
                ol = lv.get("ttft_later_turns_s", {}).get("median")
                pl = p.get("ttft_later_turns_s", {}).get("median")
                cells += [cell(ol, 1000), cell(pl, 1000), ratio(pl, ol)]
            cells.append(f"{lv['failed']}/{p.get('failed', '-')}")
            print("| " + " | ".join(cells) + " |")
        print()
        if a.png_dir:
            plot(os.path.join(a.png_dir, f"serve-{ours['workload']}.png"), ours, peer)


if __name__ == "__main__":
    main()
