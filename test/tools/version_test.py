#!/usr/bin/env python3
"""Every softmrc program answers --version: exit 0, and a first line
'<program> (softmrc) <release>' with the project's release; the DPDK
programs add the DPDK they run on, smrc-perf the libsoftmrc it loaded.
--help names the option.

  version_test.py --release X.Y.Z --bin NAME=PATH ...
"""
import argparse
import re
import subprocess
import sys

# Besides the first line: what the second must be, and the argument
# lists that must answer (softmrcd and smrc-fabric read their own options
# after '--', and take --version without it too).
SECOND = {
    'softmrcd': r'DPDK \d+(\.\d+)+',
    'smrc-fabric': r'DPDK \d+(\.\d+)+',
    'smrc-perf': r'libsoftmrc: softmrc {release} \(api \d+\.\d+, protocol \d+\)',
}
FORMS = {'softmrcd': [['--version'], ['--', '--version']],
         'smrc-fabric': [['--version'], ['--', '--version']]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--release', required=True)
    ap.add_argument('--bin', action='append', required=True, help='NAME=PATH')
    a = ap.parse_args()
    failures = []
    for spec in a.bin:
        name, path = spec.split('=', 1)
        for form in FORMS.get(name, [['--version']]):
            r = subprocess.run([path] + form, capture_output=True, text=True, timeout=30,
                               check=False)
            lines = r.stdout.splitlines()
            what = f'{name} {" ".join(form)}'
            if r.returncode != 0 or r.stderr:
                failures.append(f'{what}: exit {r.returncode}, stderr {r.stderr!r}')
                continue
            want = [re.escape(f'{name} (softmrc) {a.release}')]
            if name in SECOND:
                want.append(SECOND[name].format(release=re.escape(a.release)))
            if len(lines) != len(want) or not all(
                    re.fullmatch(w, line) for w, line in zip(want, lines)):
                failures.append(f'{what}: printed {r.stdout!r}, wanted lines {want}')
        lead = ['--'] if name in FORMS else []
        usage = subprocess.run([path] + lead + ['--help'], capture_output=True, text=True,
                               timeout=30, check=False).stdout
        if '--version' not in usage:
            failures.append(f'{name} --help does not name --version')
    for f in failures:
        print(f'FAIL: {f}')
    print(f'{len(a.bin)} programs, {len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
