#!/usr/bin/env python3
"""Goodput through plane failures on softmrcd's emulated fabric.

Runs softmrcd with config/softmrcd/recovery.yaml (four 1.25 Gb/s planes, 100
us each way; plane 2 goes down at 2 s, plane 1 is blackholed at 4 s) a few
times and collects what its summary says about each failure: goodput before
and after, the time until goodput was back to 3/4 of before (in ms and in
base RTTs), the lowest goodput meanwhile, and the longest pause of the
link's lcore from 10 ms before the failure on. Every run must also verify every byte with
no error. Prints one row per run and failure, then the median and the
worst per failure over the runs whose lcore never paused for 1 ms or more
(a pause that long is the machine descheduling it, not MRC). Run it on a
quiet machine.

Usage: bench/recovery.py [--build build] [--runs 5] [--config FILE]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

EAL = ['-l', '0-1', '--no-huge', '-m', '512', '--no-pci', '--log-level', 'lib.eal:warning']

REPORT = re.compile(
    r'^softmrcd: link \d+ plane (\d+) (down|blackholed) at t=[\d.]+s: goodput ([\d.]+) Gb/s on '
    r'\d+ planes before, ([\d.]+) Gb/s after; (?:back to \d+% of before \(less \d+%\) in ([\d.]+) ms'
    r'(?: \(([\d.]+) base RTTs of [\d.]+ us\))?|not back)[^;]*, lowest ([\d.]+) Gb/s[^;]*; '
    r'longest delivery gap [\d.]+ ms, longest lcore pause ([\d.]+) ms', re.M)
# A pause this long means the lcore was descheduled: the run says more about
# the machine than about MRC.
DISTURBED_MS = 1.0


def run_once(args, index):
    cmd = [os.path.join(args.build, 'app', 'softmrcd')] + EAL + [
        '--file-prefix', f'smrcd-recovery-{index}', '--', '--config', args.config]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0 or 'softmrcd: PASS' not in r.stdout:
        sys.exit(f'run {index + 1}: exit {r.returncode}\n{r.stdout}{r.stderr}')
    rows = []
    for m in REPORT.finditer(r.stdout):
        plane, kind, before, after, ms, rtts, lowest, pause = m.groups()
        if ms is not None and rtts is None:
            sys.exit(f'run {index + 1}: plane {plane} {kind}: no base RTT to count in (shorter '
                     f'than the goodput bins?)\n{r.stdout}')
        rows.append({'failure': f'plane {plane} {kind}', 'before': float(before),
                     'after': float(after), 'ms': float(ms) if ms else None,
                     'rtts': float(rtts) if rtts else None, 'lowest': float(lowest),
                     'pause': float(pause)})
    unmeasured = re.findall(r'^softmrcd: link \d+ plane (\d+) (down|blackholed) at t=[\d.]+s: too '
                            r'little traffic', r.stdout, re.M)
    for plane, kind in unmeasured:
        print(f'run {index + 1}: plane {plane} {kind}: too little traffic around it (the lcore '
              'was held up?); left out')
    # Every failure's line must be one or the other: a report this script
    # cannot read would otherwise leave that failure out of the run.
    failures = re.findall(r'^softmrcd: link \d+ plane \d+ (?:down|blackholed) at t=', r.stdout, re.M)
    if not failures or len(rows) + len(unmeasured) != len(failures):
        sys.exit(f'run {index + 1}: {len(failures)} failure reports, {len(rows)} read, '
                 f'{len(unmeasured)} too little traffic\n{r.stdout}')
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default=os.path.join(here, '..', 'build'))
    p.add_argument('--runs', type=int, default=5)
    p.add_argument('--config', default=os.path.join(here, '..', 'config', 'softmrcd',
                                                    'recovery.yaml'))
    args = p.parse_args()
    by_failure = {}
    print('| Run | Failure | Before | After | Back to 3/4 of before (less 10%) | Lowest meanwhile '
          '| Longest lcore pause |')
    print('|---|---|---|---|---|---|---|')
    for i in range(args.runs):
        for row in run_once(args, i):
            by_failure.setdefault(row['failure'], []).append(row)
            back = (f"{row['ms']:.2f} ms ({row['rtts']:.1f} RTTs)" if row['ms'] is not None
                    else 'not within 100 ms')
            print(f"| {i + 1} | {row['failure']} | {row['before']:.2f} Gb/s | "
                  f"{row['after']:.2f} Gb/s | {back} | {row['lowest']:.2f} Gb/s | "
                  f"{row['pause']:.2f} ms |")
    print()
    for failure, rows in by_failure.items():
        calm = [r for r in rows if r['pause'] < DISTURBED_MS]
        rtts = [r['rtts'] if r['rtts'] is not None else float('inf') for r in calm]
        if not rtts:
            print(f'{failure}: every run had the lcore paused {DISTURBED_MS} ms or more')
            continue
        print(f'{failure}: back in a median of {statistics.median(rtts):.1f} base RTTs, at worst '
              f'{max(rtts):.1f}, over the {len(calm)} of {len(rows)} runs whose lcore never '
              f'paused {DISTURBED_MS} ms or more')


if __name__ == '__main__':
    main()
