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
ICRC, so nearly all the measured time is the endpoint's.

On a shared machine the forwarding lcore does not get a whole CPU, and each
program gets a different share: the script samples the CPU time of each
one's lcore thread (rte-worker-1) over its measured interval, prints that
share, and divides each rate by it. Rates and ratios are per lcore-second:
what one lcore that had its CPU to itself would do. They still move from
run to run (other programs also take caches and memory bandwidth): --runs N
measures everything N times and prints the median of each cell (a ratio is
the median of the runs' ratios).

--port-lcore gives softmrcd's port an lcore of its own (lcore 2, on the
main lcore's CPU: `endpoints[].planes[].lcore`, docs/daemon.md): the
endpoint's lcore (rte-worker-1, whose CPU the rates are divided by) then
takes its bursts from the port lcore's rings instead of the PMD.
Usage: bench/linerate.py [--build build] [--seconds 2] [--runs 1] [--port-lcore]
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from cpu_time import cpu_ns

EAL = ['-l', '0-1', '--no-huge', '-m', '512', '--no-pci', '--log-level', 'lib.eal:warning']
PAYLOADS = [64, 256, 1024, 4096]
VALID_MTUS = {256, 512, 1024, 2048, 4096, 9000}
LCORE_THREAD = 'rte-worker-1'  # the forwarding lcore (-l 0-1) in both programs

CONFIG = """path_mtu: {mtu}
rx_verify_icrc: {icrc}
rings: {{rx_desc: 1024, tx_desc: 1024}}
stats: {{snapshot_ms: 50, log_interval_ms: 0}}
cc_profiles:
  default: {{algorithm: none}}
qp: {{mpr: 16}}
endpoints:
  - name: dut{endpoint_lcore}
    planes:
      - {{port: "net_null0", ip: "fd00::1"{port_lcore}}}
peers:
  - name: gen
    planes:
      - {{mac: "02:00:00:00:00:02", ip: "fd00::2"}}
"""


def run(cmd, window, stop_after=None):
    """Runs cmd (SIGINT stop_after s after its lcore began to poll); returns its
    exit code, its output, and the share of a CPU its lcore got from window[0]
    to window[1] s after it began to poll."""
    with tempfile.TemporaryFile('w+') as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        started, samples, last = None, [], None
        deadline = time.monotonic() + 60
        while p.poll() is None:
            now = time.monotonic()
            cpu = cpu_ns(p.pid, LCORE_THREAD)
            if cpu is not None:
                # The lcore thread sleeps until the program starts it polling.
                if started is None and last is not None and cpu - last[1] > 0.05e9 * (now - last[0]):
                    started = last[0]
                last = (now, cpu)
                if started is not None:
                    samples.append((now - started, cpu))
                    if stop_after is not None and now - started > stop_after:
                        p.send_signal(signal.SIGINT)
                        stop_after = None
            if now > deadline:
                p.kill()
            time.sleep(0.05)
        out.seek(0)
        text = out.read()
    inside = [s for s in samples if window[0] <= s[0] <= window[1]]
    if len(inside) < 2:
        sys.exit(f'{cmd[0]}: no CPU time of its lcore thread:\n{text[-2000:]}')
    (t0, c0), (t1, c1) = inside[0], inside[-1]
    return p.returncode, text, (c1 - c0) / 1e9 / (t1 - t0)


def softmrcd(args, mode, mtu, icrc=True):
    """(frame bytes, Mpps, Gb/s, lcore CPU share) of softmrcd --linerate."""
    path = os.path.join(args.workdir, f'linerate-{mtu}-{icrc}.yaml')
    with open(path, 'w') as f:
        f.write(CONFIG.format(mtu=mtu, icrc='true' if icrc else 'false',
                              endpoint_lcore='\n    lcore: 1' if args.port_lcore else '',
                              port_lcore=', lcore: 2' if args.port_lcore else ''))
    eal = ['--lcores', '0@0,1@1,2@0'] + EAL[2:] if args.port_lcore else EAL
    cmd = [args.softmrcd] + eal + ['--file-prefix', 'smrcd-bench-linerate', '--', '--config',
                                   path, '--linerate', mode]
    # The measured interval: after 300 ms of warm-up, 2 s.
    code, out, share = run(cmd, (0.5, 2.2))
    m = re.search(r'linerate \S+: (\d+)-byte frames, ([\d.]+) Mpps, ([\d.]+) Gb/s .* '
                  r'(\d+) dropped\)', out)
    if code != 0 or m is None or m.group(4) != '0':
        sys.exit(f'softmrcd --linerate {mode} failed:\n{out}')
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), share


def testpmd_pps(vdevs, topology, mbuf_size, seconds):
    """Frames per second dpdk-testpmd io-forwards over the ports `vdevs`,
    all together (median of 1 s periods past the ramp-up), and its lcore's
    CPU share."""
    cmd = ['dpdk-testpmd'] + EAL + ['--file-prefix', 'smrcd-bench-testpmd']
    for vdev in vdevs:
        cmd += ['--vdev', vdev]
    cmd += ['--', '--forward-mode=io', f'--port-topology={topology}', '--stats-period', '1',
            '--total-num-mbufs', '16384', '--mbuf-size', str(mbuf_size)]
    _, out, share = run(cmd, (2.0, seconds + 2.9), stop_after=seconds + 3)
    pps = [int(x) for x in re.findall(r'Rx-pps:\s+(\d+)', out)]  # a line per port and period
    n = len(vdevs)
    periods = [sum(pps[i:i + n]) for i in range(0, len(pps) - n + 1, n)][2:]  # past the ramp-up
    if not periods:
        sys.exit('dpdk-testpmd gave no rates:\n' + out[-2000:])
    return statistics.median(periods), share


def testpmd(args, frame, copy):
    """Mpps of io forwarding on one net_null port and the lcore's CPU share."""
    pps, share = testpmd_pps([f'net_null0,size={frame},copy={copy}'], 'loop', frame + 256,
                             args.seconds)
    return pps / 1e6, share


def measure(args):
    """One run of every row: (name, payload, frame, Mpps, Gb/s, CPU share,
    testpmd Mpps, Gb/s, CPU share, ratio, vs), rates per lcore-second."""
    rows = []

    def row(name, size, frame, mpps, share, base_mpps, base_share, vs):
        mpps, base_mpps = mpps / share, base_mpps / base_share
        rows.append((name, size, frame, mpps, mpps * frame * 8e-3, share, base_mpps,
                     base_mpps * frame * 8e-3, base_share, mpps / base_mpps, vs))

    frame, mpps, _, share = softmrcd(args, 'probe', 4096)
    io, io_share = testpmd(args, frame, 0)
    row('probe (header-only)', '-', frame, mpps, share, io, io_share, 'io')
    for size in PAYLOADS:
        mtu = size if size in VALID_MTUS else 4096
        results = {'rx': softmrcd(args, f'rx:{size}', mtu),
                   'rx-noicrc': softmrcd(args, f'rx:{size}', mtu, icrc=False),
                   'tx': softmrcd(args, f'tx:{size}', mtu)}
        frame = results['rx'][0]
        copy, copy_share = testpmd(args, frame, 1)
        io, io_share = testpmd(args, frame, 0)
        # Gb/s of frames of each mode's own size (tx frames may differ).
        for name, (f, mpps, _, share) in results.items():
            row(name, size, f, mpps, share, copy, copy_share, 'copy')
        row('testpmd io', size, frame, io, io_share, io, io_share, 'io')
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default='build')
    p.add_argument('--softmrcd', help='default: <build>/app/softmrcd')
    p.add_argument('--seconds', type=int, default=2, help='testpmd run length')
    p.add_argument('--runs', type=int, default=1, help='runs to take the median of')
    p.add_argument('--port-lcore', action='store_true',
                   help="softmrcd's port on an lcore of its own (lcore 2)")
    args = p.parse_args()
    args.softmrcd = args.softmrcd or os.path.join(args.build, 'app', 'softmrcd')
    with tempfile.TemporaryDirectory() as tmp:
        args.workdir = tmp
        runs = [measure(args) for _ in range(max(1, args.runs))]
    print('| softmrcd mode | payload B | frame B | softmrcd Mpps | softmrcd Gb/s | its CPU | '
          'testpmd Mpps | testpmd Gb/s | its CPU | ratio (vs) |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for cells in zip(*runs):
        name, size, frame, vs = cells[0][0], cells[0][1], cells[0][2], cells[0][10]
        mpps, gbps, share, tmpps, tgbps, tshare, ratio = (
            statistics.median(c[k] for c in cells) for k in (3, 4, 5, 6, 7, 8, 9))
        print(f'| {name} | {size} | {frame} | {mpps:.2f} | {gbps:.1f} | {share * 100:.0f}% | '
              f'{tmpps:.2f} | {tgbps:.1f} | {tshare * 100:.0f}% | {ratio * 100:.0f}% ({vs}) |')


if __name__ == '__main__':
    main()
