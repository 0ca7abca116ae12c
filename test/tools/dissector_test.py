#!/usr/bin/env python3
"""Checks scripts/wireshark/softmrc.lua against captures built by lib/wire.

softmrc_pcap_writer writes one pcap per EV mode and expected.tsv (see
pcap_writer.cc for its format); this runs tshark with the dissector on each
capture, with the matching EV mode preference, and compares every expected
field with what tshark shows (PDML: both the value and the text it is shown
with). tshark's own stderr must stay empty apart from its warning about
running as root. Exits 77 (skipped) where tshark is not installed.
"""

import argparse
import collections
import ipaddress
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIPPED = 77
ROOT_WARNING = 'Running as user "root" and group "root". This could be dangerous.'


def dissect(tshark, pcap, dissector, ev_mode, config_dir):
    """Returns, per frame, {field name: [(show, showname), ...]}."""
    # No personal preferences or plugins (an installed copy of this dissector
    # would clash with the one under test).
    env = {k: v for k, v in os.environ.items() if not k.startswith('XDG_')}
    env.update(HOME=config_dir, WIRESHARK_CONFIG_DIR=config_dir)
    run = subprocess.run(
        [tshark, '-r', pcap, '-X', 'lua_script:' + dissector,
         '-o', 'softmrc.ev_mode:' + ev_mode, '-T', 'pdml'],
        capture_output=True, text=True, env=env, check=False)
    noise = [l for l in run.stderr.splitlines() if l.strip() and l.strip() != ROOT_WARNING]
    if run.returncode != 0 or noise:
        sys.exit(f'tshark failed on {pcap} (exit {run.returncode}):\n' + '\n'.join(noise))
    frames = []
    for packet in ET.fromstring(run.stdout).iter('packet'):
        fields = collections.defaultdict(list)
        for field in packet.iter('field'):
            name = field.get('name')
            if name:
                fields[name].append((field.get('show', ''), field.get('showname', '')))
        frames.append(fields)
    return frames


def same_value(want, got):
    if ':' in want:  # an IPv6 address, written in full by the writer
        try:
            return ipaddress.ip_address(want) == ipaddress.ip_address(got)
        except ValueError:
            return False
    got = {'True': '1', 'False': '0'}.get(got, got)
    try:
        return int(want, 0) == int(got, 0)
    except ValueError:
        return want == got


def check(fields, kind, name, want):
    """Returns an error message, or None if the field is as expected."""
    found = fields.get(name, [])
    shows = [show for show, _ in found]
    if kind == 'absent':
        return f'shown as {shows}, expected absent' if found else None
    if kind == 'present':
        return None if found else 'missing'
    if kind == 'name':
        texts = [text for _, text in found]
        return None if any(want in t for t in texts) else f'shown as {texts}, expected "{want}"'
    if kind == 'eq':
        wants = want.split(',') if ':' not in want else [want]
        if len(shows) == len(wants) and all(map(same_value, wants, shows)):
            return None
        return f'shown as {shows}, expected {wants}'
    return f'unknown check "{kind}"'


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--writer', required=True, help='softmrc_pcap_writer')
    parser.add_argument('--dissector', required=True, help='softmrc.lua')
    parser.add_argument('--workdir', required=True, help='where the captures go')
    args = parser.parse_args()

    tshark = shutil.which('tshark')
    if not tshark:
        print('tshark is not installed: skipped')
        return SKIPPED

    out = os.path.join(args.workdir, 'dissector_test')
    config_dir = os.path.join(out, 'wireshark-config')
    os.makedirs(config_dir, exist_ok=True)
    subprocess.run([args.writer, out], check=True)

    expected = collections.defaultdict(list)  # pcap -> [(frame, kind, field, value)]
    with open(os.path.join(out, 'expected.tsv'), encoding='utf-8') as f:
        for line in f:
            pcap, frame, kind, field, value = line.rstrip('\n').split('\t')
            expected[pcap].append((int(frame), kind, field, value))

    failures = checks = 0
    for pcap, rows in expected.items():
        ev_mode = pcap.removeprefix('softmrc-').removesuffix('.pcap')
        frames = dissect(tshark, os.path.join(out, pcap), args.dissector, ev_mode, config_dir)
        checked = {frame for frame, _, _, _ in rows}
        if checked != set(range(1, len(frames) + 1)):
            print(f'{pcap}: {len(frames)} frames dissected, expectations for frames {sorted(checked)}')
            failures += 1
        for number, fields in enumerate(frames, 1):
            # A Lua error or an exception in a dissector shows up as these.
            for bad in ('_ws.lua.error', '_ws.malformed'):
                if bad in fields:
                    print(f'{pcap} frame {number}: {bad}: {fields[bad]}')
                    failures += 1
        for frame, kind, field, value in rows:
            checks += 1
            if frame > len(frames):
                continue  # reported above: the frame counts differ
            error = check(frames[frame - 1], kind, field, value)
            if error:
                print(f'{pcap} frame {frame}: {field} ({kind}): {error}')
                failures += 1

    print(f'{checks} checks over {len(expected)} captures, {failures} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
