#!/usr/bin/env python3
"""libsoftmrc's ABI against softmrc.h: the soname carries the API's major
(a library of another major is never loaded for an application), every
function the header declares is exported and nothing else is, and each
export is in a version node (SOFTMRC_<major>[.<minor>]) of a minor not
above the header's (the loader refuses a library of an older minor that
lacks a node an application was linked against).

  abi_test.py --header softmrc.h --library libsoftmrc.so
"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--header', required=True)
    ap.add_argument('--library', required=True)
    a = ap.parse_args()
    header = open(a.header).read()
    major = int(re.search(r'#define SMRC_API_VERSION_MAJOR (\d+)', header).group(1))
    minor = int(re.search(r'#define SMRC_API_VERSION_MINOR (\d+)', header).group(1))
    # Declarations: a return type, the name, its parameters (macros and
    # comments mention functions too, never at the start of a line).
    declared = set(re.findall(r'^[a-z][\w *]*?\b(smrc_\w+)\(', header, re.M))

    dynamic = subprocess.run(['readelf', '-d', '-W', a.library], capture_output=True, text=True,
                             check=True).stdout
    soname = re.search(r'\(SONAME\)\s+Library soname: \[(.*)\]', dynamic)
    symbols = subprocess.run(['readelf', '--dyn-syms', '-W', a.library], capture_output=True,
                             text=True, check=True).stdout
    exported = {}
    for line in symbols.splitlines():
        f = line.split()
        # UND: what it imports; ABS: the version nodes' own entries.
        if len(f) >= 8 and f[4] == 'GLOBAL' and f[6] not in ('UND', 'ABS'):
            name, _, node = f[7].partition('@@')
            exported[name] = node

    failures = []
    want = f'libsoftmrc.so.{major}'
    if soname is None or soname.group(1) != want:
        failures.append(f'soname {soname.group(1) if soname else None}, want {want}')
    if not declared:
        failures.append(f'no declaration found in {a.header}')
    for name in sorted(declared - exported.keys()):
        failures.append(f'{name}: declared in softmrc.h, not exported')
    for name, node in sorted(exported.items()):
        if name not in declared:
            failures.append(f'{name}: exported, not declared in softmrc.h')
        m = re.fullmatch(rf'SOFTMRC_{major}(?:\.(\d+))?', node)
        if m is None or int(m.group(1) or 0) > minor:
            failures.append(f'{name}: version node {node!r}, want SOFTMRC_{major}[.m], m <= {minor}')
    for f in failures:
        print('FAIL ' + f)
    if failures:
        return 1
    print(f'{len(declared)} functions, soname {want}, nodes of API {major}.{minor} at most')
    return 0


if __name__ == '__main__':
    sys.exit(main())
