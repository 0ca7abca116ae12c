#!/usr/bin/python3
"""Plots the results smrc-sim wrote with --out DIR.

    scripts/sim-plot.py DIR [--seed N] [--smooth-bins K]
    scripts/sim-plot.py DIR --table

writes into DIR:
  goodput.png     goodput over time, one panel per transport (the first seed,
                  or --seed), fault times marked, MRC's EV state changes below
  step_times.png  the distribution of step times over every step and seed,
                  per transport (log scale: a timeout stall is 100x a step)

--table prints instead one Markdown row per transport, over every step and
seed (the rows of docs/simulation.md's results table).

Plotting needs Debian's python3-matplotlib (scripts/setup.sh installs it);
the tests do not use this script.
"""

import argparse
import csv
import json
import os
import sys

COLOURS = {"mrc": "tab:blue", "roce": "tab:red"}
LABELS = {"mrc": "MRC (spraying, SACK, trims, EV blacklisting)",
          "roce": "single path (go-back-N, RoCE-style)"}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def smooth(values, k):
    if k <= 1:
        return values
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= k:
            acc -= values[i - k]
        out.append(acc / min(i + 1, k))
    return out


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def quantile(sorted_values, q):
    i = int(q * (len(sorted_values) - 1) + 0.5)
    return sorted_values[min(i, len(sorted_values) - 1)]


def print_table(name, runs, steps):
    for transport in dict.fromkeys(r["transport"] for r in runs):
        mine = [r for r in runs if r["transport"] == transport]
        times = sorted(float(s["time_us"]) for s in steps
                       if s["transport"] == transport and s["complete"] == "1")
        failed = sum(r["transfers_failed"] for r in mine)
        step = ("%.0f / %.0f / %.0f" % (quantile(times, 0.5), quantile(times, 0.99), times[-1])
                if times else "none complete")
        retx = sum(r["packets"]["retransmits"] for r in mine) / len(mine)
        data = sum(r["packets"]["data"] for r in mine) / len(mine)
        trims = sum(r["packets"]["trims"] for r in mine) / len(mine)
        drops = sum(sum(r["drops"].values()) for r in mine) / len(mine)
        timeouts = sum(r["packets"]["timeouts"] for r in mine) / len(mine)
        print(f"| {name} | {transport} | {len(mine)} | {step} | {failed} | "
              f"{100 * retx / max(data, 1):.2f}% | {timeouts:.0f} | {trims:.0f} | {drops:.0f} |")


def plot_goodput(runs, series, seed, k, path):
    plt = pyplot()
    transports = [r["transport"] for r in runs if r["seed"] == seed]
    if not transports:
        sys.exit(f"sim-plot: no run with seed {seed}")
    fig, axes = plt.subplots(len(transports), 1, figsize=(10, 3.2 * len(transports)),
                             squeeze=False)
    for ax, transport in zip(axes[:, 0], transports):
        rows = [r for r in series if r["transport"] == transport and int(r["seed"]) == seed]
        t_ms = [float(r["t_us"]) / 1000 for r in rows]
        gbps = smooth([float(r["goodput_gbps"]) for r in rows], k)
        ax.plot(t_ms, gbps, color=COLOURS.get(transport), lw=1.2, label=LABELS.get(transport))
        ax.set_ylabel("goodput, all hosts (Gb/s)")
        ax.set_ylim(bottom=0)
        run = next(r for r in runs if r["seed"] == seed and r["transport"] == transport)
        for i, fault in enumerate(run["faults"]):
            ax.axvline(fault["at_us"] / 1000, color="k", ls="--", lw=0.8,
                       label="fault events" if i == 0 else None)
        bad = [int(r["ev_to_bad"]) for r in rows]
        if any(bad):
            ev = ax.twinx()
            ev.bar(t_ms, bad, width=(t_ms[1] - t_ms[0]) if len(t_ms) > 1 else 0.01,
                   color="tab:orange", alpha=0.5, label="EVs to ASSUMED_BAD")
            ev.set_ylabel("EV state changes per bin")
            ev.legend(loc="upper right", fontsize=8)
        ax.set_title(f"{transport}, seed {seed}: step p50 {run['step_us']['p50']:.0f} us, "
                     f"max {run['step_us']['max']:.0f} us", fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("virtual time (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_steps(steps, path):
    plt = pyplot()
    by_transport = {}
    for r in steps:
        if r["complete"] == "1":
            by_transport.setdefault(r["transport"], []).append(float(r["time_us"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    for transport, times in sorted(by_transport.items()):
        times.sort()
        frac = [(i + 1) / len(times) for i in range(len(times))]
        ax.step(times, frac, where="post", color=COLOURS.get(transport),
                label=f"{LABELS.get(transport, transport)} ({len(times)} steps)")
    ax.set_xscale("log")
    ax.set_xlabel("step time (us, log scale)")
    ax.set_ylabel("fraction of steps")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("step-time distribution (a step ends with its slowest transfer)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description="Plot smrc-sim --out results.")
    p.add_argument("dir", help="the directory smrc-sim --out wrote")
    p.add_argument("--seed", type=int, help="the run to plot over time (default: the first)")
    p.add_argument("--smooth-bins", type=int, default=3,
                   help="moving average over this many time bins (default 3)")
    p.add_argument("--table", action="store_true",
                   help="print Markdown table rows instead of plotting")
    a = p.parse_args()
    if a.smooth_bins < 1:
        sys.exit("sim-plot: --smooth-bins must be at least 1")
    try:
        with open(os.path.join(a.dir, "summary.json")) as f:
            summary = json.load(f)
        series = read_csv(os.path.join(a.dir, "timeseries.csv"))
        steps = read_csv(os.path.join(a.dir, "steps.csv"))
    except (OSError, ValueError) as e:
        sys.exit(f"sim-plot: {e}")
    runs = summary["runs"]
    if not runs:
        sys.exit("sim-plot: summary.json has no runs")
    if a.table:
        print_table(summary["scenario"], runs, steps)
        return
    seed = a.seed if a.seed is not None else runs[0]["seed"]
    plot_goodput(runs, series, seed, a.smooth_bins, os.path.join(a.dir, "goodput.png"))
    plot_steps(steps, os.path.join(a.dir, "step_times.png"))
    print(f"wrote {a.dir}/goodput.png and {a.dir}/step_times.png")


if __name__ == "__main__":
    main()
