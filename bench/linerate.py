#!/usr/bin/env python3
"""Line rate per lcore: softmrcd's packet path next to dpdk-testpmd, on net_null.

For each payload size the same run measures, on one forwarding lcore each:

  testpmd io       dpdk-testpmd io forwarding on a net_null port (copy=0) with
                   frames of the size softmrcd's frames have: the ceiling for
                   a DPDK program that does nothing to its packets
  testpmd copy     the same with net_null copy=1: the PMD copies every frame in
                   and out, so each packet's bytes are touched twice
  softmrcd probe   header-only: probe requests in, probe replies out (parse,
                   ICRC check, engine, framing, ICRC)
  softmrcd rx      data in: parse, ICRC check, placement copy into registered
                   memory, ACKs out (middle packets of a long Write when the
                   payload is a path MTU, else one-packet Writes ACKed each)
  softmrcd rx-noicrc  the same with rx_verify_icrc: false
  softmrcd tx      data out: segmentation, framing with the payload copied
                   into the mbuf, ICRC; ACKs in

softmrcd's peer is synthetic (softmrcd --linerate, app/softmrcd/linerate.h):
frames are pre-built in the RX pool and the peer only patches the PSN and
ICRC, so nearly all the measured time is the endpoint's. Ratios are
softmrcd / testpmd from this same run; on a shared machine only ratios mean
anything. Usage: bench/linerate.py [--build build] [--seconds 2]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

EAL = ['-l', '0-1', '--no-huge', '-m', '512', '--no-pci', '--log-level', 'lib.eal:warning']
PAYLOADS = [64, 256, 1024, 4096]
VALID_MTUS = {256, 512, 1024, 2048, 4096, 9000}

CONFIG = """path_mtu: {mtu}
rx_verify_icrc: {icrc}
rings: {{rx_desc: 1024, tx_desc: 1024}}
stats: {{snapshot_ms: 50, log_interval_ms: 0}}
cc_profiles:
  default: {{algorithm: none}}
qp: {{mpr: 16}}
endpoints:
  - name: dut
    planes:
      - {{port: "net_null0", ip: "fd00::1"}}
peers:
  - name: gen
    planes:
      - {{mac: "02:00:00:00:00:02", ip: "fd00::2"}}
"""


def softmrcd(args, mode, mtu, icrc=True):
    path = os.path.join(args.workdir, f'linerate-{mtu}-{icrc}.yaml')
    with open(path, 'w') as f:
        f.write(CONFIG.format(mtu=mtu, icrc='true' if icrc else 'false'))
    cmd = [args.softmrcd] + EAL + ['--file-prefix', 'smrcd-bench-linerate', '--', '--config',
                                   path, '--linerate', mode]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    m = re.search(r'linerate \S+: (\d+)-byte frames, ([\d.]+) Mpps, ([\d.]+) Gb/s .* '
                  r'(\d+) dropped\)', r.stdout)
    if r.returncode != 0 or m is None or m.group(4) != '0':
        sys.exit(f'softmrcd --linerate {mode} failed:\n{r.stdout}{r.stderr}')
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def testpmd(args, frame, copy):
    """Mpps of io forwarding on one net_null port (median of 1 s periods)."""
    cmd = ['timeout', '-s', 'INT', str(args.seconds + 3), 'dpdk-testpmd'] + EAL + [
        '--file-prefix', 'smrcd-bench-testpmd', '--vdev', f'net_null0,size={frame},copy={copy}',
        '--', '--forward-mode=io', '--port-topology=loop', '--stats-period', '1',
        '--total-num-mbufs', '16384', '--mbuf-size', str(frame + 256)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    pps = [int(x) for x in re.findall(r'Rx-pps:\s+(\d+)', r.stdout)][2:]  # skip the ramp-up
    if not pps:
        sys.exit('dpdk-testpmd gave no rates:\n' + r.stdout[-2000:] + r.stderr[-2000:])
    return statistics.median(pps) / 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default='build')
    p.add_argument('--softmrcd', help='default: <build>/app/softmrcd')
    p.add_argument('--seconds', type=int, default=2, help='testpmd run length')
    args = p.parse_args()
    args.softmrcd = args.softmrcd or os.path.join(args.build, 'app', 'softmrcd')
    with tempfile.TemporaryDirectory() as tmp:
        args.workdir = tmp
        rows = []
        frame, mpps, gbps = softmrcd(args, 'probe', 4096)
        io = testpmd(args, frame, 0)
        rows.append(('probe (header-only)', '-', frame, mpps, gbps, io, io * frame * 8e-3,
                     mpps / io, 'io'))
        for size in PAYLOADS:
            mtu = size if size in VALID_MTUS else 4096
            results = {'rx': softmrcd(args, f'rx:{size}', mtu),
                       'rx-noicrc': softmrcd(args, f'rx:{size}', mtu, icrc=False),
                       'tx': softmrcd(args, f'tx:{size}', mtu)}
            frame = results['rx'][0]
            copy = testpmd(args, frame, 1)
            io = testpmd(args, frame, 0)
            for name, (f, mpps, gbps) in results.items():
                tp = copy * f * 8e-3
                rows.append((name, size, f, mpps, gbps, copy, tp, gbps / tp, 'copy'))
            rows.append(('testpmd io', size, frame, io, io * frame * 8e-3, io, io * frame * 8e-3,
                         1.0, 'io'))
    print('| softmrcd mode | payload B | frame B | softmrcd Mpps | softmrcd Gb/s | '
          'testpmd Mpps | testpmd Gb/s | ratio (vs) |')
    print('|---|---|---|---|---|---|---|---|')
    for name, size, frame, mpps, gbps, tmpps, tgbps, ratio, vs in rows:
        print(f'| {name} | {size} | {frame} | {mpps:.2f} | {gbps:.1f} | {tmpps:.2f} | '
              f'{tgbps:.1f} | {ratio * 100:.0f}% ({vs}) |')


if __name__ == '__main__':
    main()
