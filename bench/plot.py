#!/usr/bin/env python3
"""Draws arbiter-bench's plots from the CSV files in a results folder.

    python3 bench/plot.py bench/results/cpu        # writes the PNGs next to the CSV

Needs only Debian's python3-matplotlib (scripts/install-deps.sh). Each plot's
title names the device, backend, commit and date from method.csv, so a picture
never travels without the run it came from.
"""
import csv
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def subtitle(method):
    m = {r["key"]: r["value"] for r in method}
    return "%s - commit %s - %s" % (m.get("device", "?"), m.get("commit", "?") or "?",
                                    m.get("date", "?"))


def skinny_panels(kernels, limit=3):
    """The N x K pairs with the most M values (skinny group first), at most `limit`."""
    ms = defaultdict(set)
    for r in kernels:
        if r["group"] in ("skinny", "square"):
            ms[(int(r["n"]), int(r["k"]))].add(int(r["m"]))
    pairs = sorted(ms, key=lambda nk: (-len(ms[nk]), nk))
    return [nk for nk in pairs if len(ms[nk]) >= 2][:limit]


def plot_vs_m(kernels, method, column, ylabel, title, out):
    panels = skinny_panels(kernels)
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(max(7, 5 * len(panels)), 4.2), squeeze=False)
    for ax, (n, k) in zip(axes[0], panels):
        lines = defaultdict(list)
        for r in kernels:
            if int(r["n"]) == n and int(r["k"]) == k and num(r[column]) is not None:
                lines[r["candidate"]].append((int(r["m"]), num(r[column])))
        for name in sorted(lines):
            pts = sorted(lines[name])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M")
        ax.set_ylabel(ylabel)
        ax.set_title("N=%d K=%d %s" % (n, k, kernels[0]["dtype"]))
        ax.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("%s\n%s" % (title, subtitle(method)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def plot_squares(kernels, method, out):
    lines = defaultdict(list)
    for r in kernels:
        if r["group"] == "square" and num(r["tflops"]) is not None:
            lines[r["candidate"]].append((int(r["m"]), num(r["tflops"])))
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in sorted(lines):
        pts = sorted(lines[name])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s (median)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Squares: TFLOP/s per candidate\n%s" % subtitle(method), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def plot_selection(selection, method, out):
    rows = [r for r in selection if num(r["served_vs_floor"]) is not None]
    if not rows:
        return False
    vendor = next((m["value"] for m in method if m["key"] == "vendor"), "vendor")
    labels = ["%sx%sx%s %s" % (r["m"], r["n"], r["k"], r["dtype"]) for r in rows]
    served = [num(r["served_vs_floor"]) for r in rows]
    alone = [num(r["vendor_vs_floor"]) or 0 for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rows) + 2), 4.5))
    ax.bar([i - 0.2 for i in x], served, width=0.4, label="served by arbiter")
    ax.bar([i + 0.2 for i in x], alone, width=0.4, label="%s alone" % vendor)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("device time / floor (1 = at the floor)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Selection: served and %s alone against the shape's floor\n%s"
                 % (vendor, subtitle(method)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def plot_service(matmul, method, out):
    lines = defaultdict(list)
    for r in matmul:
        if num(r["e2e_vs_inprocess"]) is not None:
            lines["%s, %s path" % (r["transport"], r["path"])].append(
                (int(r["n"]), num(r["e2e_vs_inprocess"])))
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in sorted(lines):
        pts = sorted(lines[name])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("end to end / in-process (1 = no service cost)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Matmul through arbiterd against the same work in-process\n%s"
                 % subtitle(method), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def plot_tuning(tuning, method, out):
    pts = [(2.0 * int(r["m"]) * int(r["n"]) * int(r["k"]), num(r["tune_wall_s"]),
            "%sx%sx%s %s" % (r["m"], r["n"], r["k"], r["dtype"]))
           for r in tuning if num(r["tune_wall_s"]) is not None]
    if not pts:
        return False
    pts.sort()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
    for x, y, label in pts:
        ax.annotate(label, (x, y), fontsize=7, textcoords="offset points", xytext=(4, -10))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOPs of the shape")
    ax.set_ylabel("seconds to measure one bucket")
    ax.grid(True, alpha=0.3)
    ax.set_title("Tuning cost: one bucket, every candidate\n%s" % subtitle(method), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    folder = argv[1]
    method = read(folder, "method.csv")
    kernels = read(folder, "kernels.csv")
    selection = read(folder, "selection.csv")
    written = []
    if kernels:
        vendor = next((m["value"] for m in method if m["key"] == "vendor"), "vendor")
        for name, ok in (
            ("kernels_tflops.png",
             plot_vs_m(kernels, method, "tflops", "TFLOP/s (median)",
                       "Kernels: TFLOP/s against M, one line per candidate",
                       os.path.join(folder, "kernels_tflops.png"))),
            ("kernels_vs_vendor.png",
             plot_vs_m(kernels, method, "pct_of_vendor", "%% of %s (higher is faster)" % vendor,
                       "Kernels: %% of %s against M" % vendor,
                       os.path.join(folder, "kernels_vs_vendor.png"))),
            ("kernels_squares.png",
             plot_squares(kernels, method, os.path.join(folder, "kernels_squares.png"))),
        ):
            if ok:
                written.append(name)
    if selection and plot_selection(selection, method, os.path.join(folder, "selection_floor.png")):
        written.append("selection_floor.png")
    matmul = read(folder, "service_matmul.csv")
    if matmul and plot_service(matmul, method, os.path.join(folder, "service_e2e.png")):
        written.append("service_e2e.png")
    tuning = read(folder, "tuning.csv")
    if tuning and plot_tuning(tuning, method, os.path.join(folder, "tuning_cost.png")):
        written.append("tuning_cost.png")
    print("plot.py: wrote %s in %s" % (", ".join(written) or "nothing", folder))
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
