#!/usr/bin/env python3
"""One Markdown table from serve_bench.py results of deltallm and llama-server on the same
workload: per concurrency level, output tokens/s, TTFT and TPOT (median) of each engine and the
ratio (ours / peer for throughput, peer / ours for latencies, so above 1 is better for us).

  serve_compare.py DIR/serve-deltallm-random.json ... --peer-dir DIR [--png-dir DIR]
(the peer's file for serve-deltallm-W.json is serve-llama-server-W.json in --peer-dir). With
--png-dir, serve-W.svg per workload: output tokens/s and median TTFT (and, for multi-turn chats,
the later turns' median TTFT) against concurrency, both engines. The SVG is written here, with no
plotting library, so the GPU machine (no network, no matplotlib) draws it too."""
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


def svg_panel(x0, title, series, log_y=False):
    """One 330x240 panel at x offset x0: series [(name, colour, dash, [(concurrency, value)])]
    on a log2 concurrency axis; y from 0 (or, log_y, log10 from the smallest value)."""
    import math
    w, h, l, t, r, b = 330, 240, 52, 28, 10, 36
    pts = [p for _, _, _, ps in series for p in ps if p[1] is not None and p[1] > 0]
    if not pts:
        return f'<text x="{x0 + 20}" y="40">{title}: no data</text>'
    xs = [math.log2(c) for c, _ in pts]
    xmin, xmax = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    fy = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    ys = [fy(v) for _, v in pts]
    ymin = min(ys) if log_y else 0.0
    ymax = max(ys) if max(ys) > ymin else ymin + 1
    X = lambda c: x0 + l + (math.log2(c) - xmin) / (xmax - xmin) * (w - l - r)
    Y = lambda v: t + (1 - (fy(v) - ymin) / (ymax - ymin)) * (h - t - b)
    out = [f'<text x="{x0 + w / 2}" y="16" text-anchor="middle" font-weight="bold">{title}</text>',
           f'<rect x="{x0 + l}" y="{t}" width="{w - l - r}" height="{h - t - b}" fill="none" stroke="#999"/>']
    for c in sorted({c for c, _ in pts}):
        out.append(f'<text x="{X(c):.1f}" y="{h - b + 14}" text-anchor="middle">{c}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{h - 4}" text-anchor="middle">concurrent requests</text>')
    for k in range(5):
        yv = ymin + (ymax - ymin) * k / 4
        v = 10 ** yv if log_y else yv
        yy = t + (1 - k / 4) * (h - t - b)
        out.append(f'<text x="{x0 + l - 4}" y="{yy + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    for name, colour, dash, ps in series:
        ps = [(c, v) for c, v in ps if v is not None and v > 0]
        if not ps:
            continue
        line = " ".join(f"{X(c):.1f},{Y(v):.1f}" for c, v in ps)
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dash}"/>')
        out += [f'<circle cx="{X(c):.1f}" cy="{Y(v):.1f}" r="3" fill="{colour}"/>' for c, v in ps]
    return "\n".join(out)


def plot(path, ours, peer):
    """serve-W.svg: throughput and latency panels, deltallm solid, llama-server dashed."""
    engines = (("deltallm", "#1f77b4", "", ours), ("llama-server", "#d62728", "6,4", peer))

    def series(key):
        return [(name, colour, dash, [(lv["concurrency"], key(lv)) for lv in
                 sorted(run["levels"], key=lambda x: x["concurrency"])])
                for name, colour, dash, run in engines]

    ms = lambda d: None if d is None else d * 1000
    panels = [("output tokens/s", series(lambda lv: lv["output_throughput"]), False),
              ("median TTFT (ms)", series(lambda lv: ms(lv["ttft_s"]["median"])), True)]
    if ours["workload"] in ("multiturn", "chat"):
        panels.append(("later turns' median TTFT (ms)",
                       series(lambda lv: ms(lv.get("ttft_later_turns_s", {}).get("median"))), True))
    width = 340 * len(panels) + 10
    body = "\n".join(svg_panel(10 + 340 * i, t, s, lg) for i, (t, s, lg) in enumerate(panels))
    legend = "".join(
        f'<line x1="{20 + 150 * i}" y1="262" x2="{50 + 150 * i}" y2="262" stroke="{c}" '
        f'stroke-width="2" stroke-dasharray="{d}"/><text x="{56 + 150 * i}" y="266">{n}</text>'
        for i, (n, c, d, _) in enumerate(engines))
    title = f"{ours['workload']} workload, {os.path.basename(ours['model'])}"
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="300" '
                f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" '
                f'fill="white"/>\n{body}\n{legend}\n<text x="10" y="290">{title}</text>\n</svg>\n')


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
        think = ours.get("args", {}).get("think_ms", 0) or 0
        pause = f", a pause of {think:g} ms before each later turn" if think else ""
        print(f"### {ours['workload']} workload{pause}, {os.path.basename(ours['model'])}\n")
        multi = ours["workload"] in ("multiturn", "chat")
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
            suffix = f"-think{think:g}" if think else ""
            plot(os.path.join(a.png_dir, f"serve-{ours['workload']}{suffix}.svg"), ours, peer)


if __name__ == "__main__":
    main()
