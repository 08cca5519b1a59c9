#!/usr/bin/env python3
"""One Markdown table from serve_bench.py results of deltallm and llama-server on the same
workload: per concurrency level, output tokens/s, TTFT and TPOT (median) of each engine and the
ratio (ours / peer for throughput, peer / ours for latencies, so above 1 is better for us).

  serve_compare.py DIR/serve-deltallm-random.json ... --peer-dir DIR
(the peer's file for serve-deltallm-W.json is serve-llama-server-W.json in --peer-dir)."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours", nargs="+")
    ap.add_argument("--peer-dir", required=True)
    a = ap.parse_args()
    for path in a.ours:
        ours = load(path)
        peer_path = os.path.join(a.peer_dir, os.path.basename(path).replace("deltallm", "llama-server"))
        peer = load(peer_path) if os.path.exists(peer_path) else {"levels": []}
        by_c = {lv["concurrency"]: lv for lv in peer["levels"]}
        print(f"### {ours['workload']} workload, {os.path.basename(ours['model'])}\n")
        print("| concurrency | tok/s ours | tok/s llama-server | ratio | TTFT ms ours (median) "
              "| TTFT ms peer | ratio | TPOT ms ours (median) | TPOT ms peer | ratio | failed ours/peer |")
        print("|" + "---|" * 11)
        for lv in ours["levels"]:
            c = lv["concurrency"]
            p = by_c.get(c, {})
            pt = p.get("ttft_s", {}).get("median")
            pp = p.get("tpot_s", {}).get("median")
            print(f"| {c} | {lv['output_throughput']:.1f} | {cell(p.get('output_throughput'))} | "
                  f"{ratio(lv['output_throughput'], p.get('output_throughput'))} | "
                  f"{cell(lv['ttft_s']['median'], 1000)} | {cell(pt, 1000)} | "
                  f"{ratio(pt, lv['ttft_s']['median'])} | {cell(lv['tpot_s']['median'], 1000, '{:.2f}')} | "
                  f"{cell(pp, 1000, '{:.2f}')} | {ratio(pp, lv['tpot_s']['median'])} | "
                  f"{lv['failed']}/{p.get('failed', '-')} |")
        print()


if __name__ == "__main__":
    main()
