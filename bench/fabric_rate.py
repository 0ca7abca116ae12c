#!/usr/bin/env python3
"""smrc-fabric's forwarding rate per lcore, next to dpdk-testpmd on the same vdevs.

Both programs forward on one lcore between two net_pcap ports that replay
a capture of MRC frames without end (infinite_rx) and drop what they send:

  smrc-fabric   one link, plane 0 between the two ports: every frame is read
                as a switch reads it, goes through the link model (rate
                10 Tb/s, no delay, no loss, so nothing waits or drops) and
                the delay line, and in SRv6 mode has its uSID path consumed
  testpmd io    io forwarding between the same two ports (paired): the
                ceiling of a DPDK program on these PMDs

The captures are the Wireshark dissector test's (test/tools'
softmrc_pcap_writer: data, trimmed data, ACKs, NACKs, probes, a port status
in UDP mode; data, some with an SRH, in SRv6 mode). Rates
are per lcore-second (bench/linerate.py: the CPU time of each program's
lcore thread divides its rate); --runs N prints the median of N runs.
Usage: bench/fabric_rate.py [--build build] [--seconds 3] [--runs 1]
       (or ninja -C build fabric_rate)
"""

import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

from linerate import EAL, run, share_of, testpmd_pps

MODES = ('udp', 'srv6')


def pcap_ports(capture):
    return [f'net_pcap{p},rx_pcap={capture},infinite_rx=1' for p in range(2)]


def frames_in(capture):
    """(frames, their mean length in bytes) of a pcap file."""
    with open(capture, 'rb') as f:
        data = f.read()
    at, sizes = 24, []  # past the file header; each record has 16 bytes of its own
    while at + 16 <= len(data):
        length = struct.unpack_from('<I', data, at + 8)[0]
        sizes.append(length)
        at += 16 + length
    return len(sizes), sum(sizes) / len(sizes)


def fabric(args, mode, capture):
    """(frames per second, lcore CPU share) of smrc-fabric."""
    path = os.path.join(args.workdir, f'fabric-{mode}.yaml')
    a, b = pcap_ports(capture)
    with open(path, 'w') as f:
        f.write(f'path_mtu: 4096\nstats: {{snapshot_ms: 50, log_interval_ms: 0}}\n'
                f'links:\n  - {{a: ["{a}"], b: ["{b}"], rate_gbps: 10000, ev_mode: {mode}}}\n')
    # stdbuf: the summary's lines are not flushed one by one.
    cmd = ['stdbuf', '-oL', args.smrc_fabric] + EAL + [
        '--file-prefix', 'smrcd-bench-fabric', '--', '--config', path,
        '--duration-ms', str(args.seconds * 1000)]
    # Its lcore forwards from the "forwarding" line (printed as it is
    # launched) to the "stopped" line (printed once it stopped): the CPU
    # time is taken between the two, the frames are counted between them.
    r = run(cmd, marks=r'smrc-fabric: (?:\d+ links, \d+ ports, forwarding|stopped \(duration\))')
    d = re.search(r'link 0: delivered (\d+) packets \(([\d.]+) MiB of payload\).* dropped (\d+)'
                  r'(?: \(([^)]*)\))?', r.text)
    if r.code != 0 or len(r.marks) != 2 or d is None:
        sys.exit(f'smrc-fabric failed:\n{r.text[-3000:]}')
    # Frames still in the delay line when it stopped are dropped at_shutdown
    # (4d810d2); any other drop means the fabric did not keep up.
    reasons = dict(x.rsplit(' ', 1) for x in d.group(4).split(', ')) if d.group(4) else {}
    if int(d.group(3)) != sum(int(v) for v in reasons.values()) or set(reasons) - {'at_shutdown'}:
        sys.exit(f'smrc-fabric dropped frames:\n{r.text[-3000:]}')
    (t0, c0, _), (t1, c1, _) = r.marks
    return int(d.group(1)) / (t1 - t0), share_of('smrc-fabric', c1 - c0, t1 - t0, r.text)


def measure(args):
    """Per mode: (mode, fabric Mpps, its share, testpmd Mpps, its share, ratio,
    the capture's frames and mean frame bytes) with the rates per lcore-second."""
    rows = []
    for mode in MODES:
        capture = os.path.join(args.workdir, f'softmrc-{mode}.pcap')
        fps, share = fabric(args, mode, capture)
        # The capture's largest frames are 4 KiB ones.
        base, base_share = testpmd_pps(pcap_ports(capture), 'paired', 4608, args.seconds)
        mpps, base_mpps = fps / share / 1e6, base / base_share / 1e6
        rows.append((mode, mpps, share, base_mpps, base_share, mpps / base_mpps) +
                    frames_in(capture))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default='build')
    p.add_argument('--smrc-fabric', help='default: <build>/app/smrc-fabric')
    p.add_argument('--pcap-writer', help='default: <build>/test/tools/softmrc_pcap_writer')
    p.add_argument('--seconds', type=int, default=3, help='length of each program\'s run')
    p.add_argument('--runs', type=int, default=1, help='runs to take the median of')
    args = p.parse_args()
    if args.seconds < 2:
        sys.exit('--seconds must be at least 2')
    args.smrc_fabric = args.smrc_fabric or os.path.join(args.build, 'app', 'smrc-fabric')
    writer = args.pcap_writer or os.path.join(args.build, 'test', 'tools', 'softmrc_pcap_writer')
    with tempfile.TemporaryDirectory() as tmp:
        args.workdir = tmp
        subprocess.run([writer, tmp], check=True, capture_output=True)
        runs = [measure(args) for _ in range(max(1, args.runs))]
    print('| mode | frames (mean B) | smrc-fabric Mpps | its CPU | testpmd io Mpps | its CPU | '
          'ratio |')
    print('|---|---|---|---|---|---|---|')
    for cells in zip(*runs):
        mpps, share, tmpps, tshare, ratio = (statistics.median(c[k] for c in cells)
                                             for k in range(1, 6))
        mode, frames, mean = cells[0][0], cells[0][6], cells[0][7]
        print(f'| {mode} | {frames} ({mean:.0f}) | {mpps:.2f} | {share * 100:.0f}% | '
              f'{tmpps:.2f} | {tshare * 100:.0f}% | {ratio * 100:.0f}% |')


if __name__ == '__main__':
    main()
