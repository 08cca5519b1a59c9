#!/usr/bin/env python3
"""Draws a CSV written by compare.py into one PNG: tokens/s of deltallm and llama.cpp against
prompt length (pp rows without depth; log-log), and a bar chart of the ratios deltallm / llama.cpp
of every row.

  plot.py sweep.csv sweep.png [--title TEXT]
"""
import argparse
import csv
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot: matplotlib is missing (Debian: apt-get install python3-matplotlib); the CSV is "
                 f"still in {a.csv}")
    with open(a.csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot: {a.csv} has no rows")
    # The curve is over prompt length from an empty context; rows at a depth (-d) are bars only.
    pp = sorted((r for r in rows if int(r["n_prompt"]) > 0 and int(r.get("n_depth") or 0) == 0),
                key=lambda r: int(r["n_prompt"]))
    models = sorted({r["model"] for r in rows})
    if not pp:  # depth rows or tg only: the ratios alone
        fig, ax2 = plt.subplots(1, 1, figsize=(6, 4.5))
        draw_ratios(ax2, rows, models)
        finish(fig, a, rows)
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for m in sorted({r["model"] for r in pp}):
        mr = [r for r in pp if r["model"] == m]
        x = [int(r["n_prompt"]) for r in mr]
        ax1.errorbar(x, [float(r["ours_ts"]) for r in mr], yerr=[float(r["ours_sd"]) for r in mr],
                     marker="o", label=f"deltallm {m}")
        ax1.errorbar(x, [float(r["peer_ts"]) for r in mr], yerr=[float(r["peer_sd"]) for r in mr],
                     marker="s", linestyle="--", label=f"llama.cpp {m}")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("prompt length (tokens)")
    ax1.set_ylabel("prompt processing (tokens/s)")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    draw_ratios(ax2, rows, models)
    finish(fig, a, rows)


def draw_ratios(ax, rows, models):
    labels = [f"{r['test']}\n{r['model'][:18]}" if len(models) > 1 else r["test"] for r in rows]
    ratios = [float(r["ratio"]) for r in rows]
    ax.bar(range(len(rows)), ratios, color=["tab:green" if x >= 1 else "tab:red" for x in ratios])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("deltallm / llama.cpp")
    for i, x in enumerate(ratios):
        ax.text(i, x, f"{x:.2f}", ha="center", va="bottom", fontsize=7)


def finish(fig, a, rows):
    fig.suptitle(a.title or f"{rows[0]['device']}: deltallm vs llama.cpp")
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)
    print(f"plot: wrote {a.png}")


if __name__ == "__main__":
    main()
