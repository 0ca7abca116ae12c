#!/usr/bin/env python3
"""The recovery target in virtual time: two endpoints of the whole stack
(engine, framing, parsing, NSCC) over smrc-loopback's emulated fabric, four
equal planes, plane 2 failing mid-transfer. Goodput must be back to 3/4 of
its level before the failure within 10 base RTTs, every byte verified, no
error; as a silent blackhole (found by loss inference and probes) and as a
link-down port event. Virtual time: the result does not depend on the
machine (docs/benchmarks.md, "Plane failure in smrc-loopback").

usage: loopback_recovery.py <smrc-loopback>"""
import re
import subprocess
import sys

MAX_BASE_RTTS = 10


def main():
    loopback = sys.argv[1]
    failures = []
    for name, extra in (('blackhole', []), ('link down', ['--link-down'])):
        cmd = [loopback, '--gib', '0.25', '--fail-at-ms', '3', '--trim-plane', '-1'] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        out = r.stdout + r.stderr
        m = re.search(r'back to 3/4 of the old level in (\d+) us \((\d+) base RTTs\)', out)
        if (r.returncode != 0 or 'PASS: every byte verified' not in out or
                not re.search(r' verified in [\d.]+ virtual ms .*, 0 errors,', out)):
            failures.append(f'{name}: exit {r.returncode}, not every byte verified:\n{out}')
        elif m is None or int(m.group(2)) > MAX_BASE_RTTS:
            failures.append(f'{name}: not back to 3/4 within {MAX_BASE_RTTS} base RTTs:\n{out}')
        else:
            print(f'{name}: back to 3/4 of the old level in {m.group(1)} us '
                  f'({m.group(2)} base RTTs)')
    for f in failures:
        print('FAIL ' + f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
