#!/usr/bin/env python3
"""smrc-loopback's command line and summary: integer options take integers
only, a window that would not fit in memory is refused (status 2 and a
message naming the option); the summary's goodput is what was verified over
the time it took, recomputed here from the printed numbers; a run whose
only plane fails ends when the QP gives up (exit 1, FAIL), not at the 60 s
virtual limit; a failure due after the end of the run is reported as not
having happened. Virtual time: the results do not depend on the machine.

usage: loopback_cli_test.py <smrc-loopback>"""
import re
import subprocess
import sys

SUMMARY = re.compile(r'^([\d.]+) GiB verified in ([\d.]+) virtual ms \(([\d.]+) Gb/s\), (\d+) errors',
                     re.M)


def run(loopback, *args):
    r = subprocess.run([loopback, *args], capture_output=True, text=True, timeout=120,
                       check=False)
    return r.returncode, r.stdout, r.stderr


def main():
    loopback = sys.argv[1]
    failures = []

    def fail(what, out=''):
        failures.append(what + ('\n' + out if out else ''))

    for args, text in ((['--planes', '2.5'], "bad value '2.5' for --planes"),
                       (['--window', '1.5'], "bad value '1.5' for --window"),
                       (['--msg-kib', '64.9'], "bad value '64.9' for --msg-kib"),
                       (['--mtu', '4096.0'], "bad value '4096.0' for --mtu"),
                       (['--fail-plane', '1.5'], "bad value '1.5' for --fail-plane"),
                       (['--trim-plane', '-2'], "bad value '-2' for --trim-plane"),
                       (['--msg-kib', '65536', '--window', '128'], '--msg-kib x --window')):
        code, out, err = run(loopback, *args)
        if code != 2 or text not in err:
            fail(f'smrc-loopback {" ".join(args)}: exit {code}, wanted 2 and "{text}"', out + err)

    # Its only plane fails: the QP exhausts its retries after about 35 ms of
    # exponential backoff; the run ends there, and fails.
    code, out, err = run(loopback, '--planes', '1', '--fail-plane', '0', '--trim-plane', '-1',
                         '--fail-at-ms', '1', '--gib', '0.1')
    m = SUMMARY.search(out)
    if code != 1 or 'FAIL' not in out or 'RETRY_EXCEEDED' not in err or m is None:
        fail(f'every plane failed: exit {code}, wanted 1, FAIL and RETRY_EXCEEDED', out + err)
    else:
        ms = float(m[2])
        if ms > 1000:
            fail(f'every plane failed: the run went on to {ms} virtual ms after the QP failed',
                 out[-2000:])
        if out.count('\nt=') > 100:
            fail(f'every plane failed: {out.count(chr(10) + "t=")} interval lines')

    # Goodput in the summary: verified bytes over the virtual time, for a
    # run that verified everything and for one that did not.
    for args in (['--gib', '0.05', '--fail-plane', '-1'],
                 ['--planes', '1', '--fail-plane', '0', '--trim-plane', '-1', '--fail-at-ms', '1',
                  '--gib', '0.1']):
        code, out, err = run(loopback, *args)
        m = SUMMARY.search(out)
        if m is None:
            fail(f'smrc-loopback {" ".join(args)}: no summary line', out + err)
            continue
        gib, ms, gbps = float(m[1]), float(m[2]), float(m[3])
        want = gib * 2**30 * 8 / (ms * 1e6)
        # The printed GiB and ms are rounded: allow for that.
        slack = want * (0.006 / max(gib, 0.001) + 0.06 / ms) + 0.06
        if abs(gbps - want) > slack:
            fail(f'smrc-loopback {" ".join(args)}: goodput {gbps} Gb/s, but {gib} GiB in {ms} '
                 f'ms is {want:.2f} Gb/s', out[-1500:])

    code, out, err = run(loopback, '--gib', '0.01', '--fail-at-ms', '100')
    if code != 0 or 'plane 2 did not fail: the run ended before t=100.0 ms' not in out:
        fail(f'a failure after the end: exit {code}, and no "did not fail" line', out + err)

    for f in failures:
        print('FAIL ' + f)
    if not failures:
        print('loopback_cli_test: all checks passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
