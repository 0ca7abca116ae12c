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
  softmrcd rx-fcs  rx with each frame's FCS behind it, as a NIC that keeps the
                   CRC (RTE_ETH_RX_OFFLOAD_KEEP_CRC) leaves it: the ICRC check
                   folds the headers and takes the body's part from the FCS
                   (net_null keeps none: the synthetic peer writes it)
  softmrcd tx      data out: segmentation, framing with the payload copied
                   into the mbuf, ICRC; ACKs in

softmrcd's peer is synthetic (softmrcd --linerate, app/softmrcd/linerate.h):
frames are pre-built in the RX pool and the peer only patches the PSN and
ICRC, so nearly all the measured time is the endpoint's.

On a shared machine the forwarding lcore does not get a whole CPU, and each
program gets a different share: the script reads the CPU time of each
one's lcore thread (rte-worker-1) at the two moments its packets are
counted between (softmrcd's linerate line and the seconds it names,
testpmd's statistics prints), prints that share, and divides each rate
by it. Data rows' ratios are of Gb/s, each of its own frames (the same
size but for tx at 64 B). Rates and ratios are per lcore-second:
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
import threading
import time

from cpu_time import cpu_ns, lcore_thread

EAL = ['-l', '0-1', '--no-huge', '-m', '512', '--no-pci', '--log-level', 'lib.eal:warning']
PAYLOADS = [64, 256, 1024, 4096]
VALID_MTUS = {256, 512, 1024, 2048, 4096, 9000}
LCORE_THREAD = lcore_thread(1)  # the forwarding lcore (-l 0-1) in both programs

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


class Run:
    """A program run by run(): its exit code and output; `samples`, the CPU
    time of its lcore thread as (s since the thread began to poll, ns),
    every POLL_S; and `marks`, each output line that matched run()'s
    `marks` as (s since the thread began to poll, the thread's CPU ns read
    as the line arrived, the match)."""

    def __init__(self, code, text, samples, marks):
        self.code, self.text, self.samples, self.marks = code, text, samples, marks

    def cpu_at(self, t):
        """The lcore thread's CPU ns at t, between the samples around it."""
        for (t0, c0), (t1, c1) in zip(self.samples, self.samples[1:]):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c0
        return None


POLL_S = 0.02
MIN_SHARE = 0.1  # below this, a rate divided by the share is mostly the division


def run(cmd, marks=None, stop=None, timeout=60):
    """Runs cmd and returns a Run. `marks`: a regex; each line of output it
    matches is timestamped with the lcore thread's CPU time as it arrives
    (the program must flush its lines: stdbuf -oL for one that does not).
    `stop(marks)`: true once the program may have its SIGINT."""
    lines, found, started = [], [], None
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def read():
        for line in p.stdout:
            if marks is not None:
                m = re.search(marks, line)
                if m:
                    found.append((time.monotonic(), cpu_ns(p.pid, LCORE_THREAD), m))
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    samples, last, stopped = [], None, False
    deadline = time.monotonic() + timeout
    while p.poll() is None:
        now = time.monotonic()
        cpu = cpu_ns(p.pid, LCORE_THREAD)
        if cpu is not None:
            # The lcore thread sleeps until the program starts it polling.
            if started is None and last is not None and cpu - last[1] > 0.05e9 * (now - last[0]):
                started = last[0]
                samples.append((0.0, last[1]))
            last = (now, cpu)
            if started is not None:
                samples.append((now - started, cpu))
        if (not stopped and started is not None and stop is not None and
                stop([(t - started, c, m) for t, c, m in list(found) if c is not None])):
            p.send_signal(signal.SIGINT)
            stopped = True
        if now > deadline:
            p.kill()
        time.sleep(POLL_S)
    reader.join(10)
    text = ''.join(lines)
    if started is None or len(samples) < 2:
        sys.exit(f'{cmd[0]}: no CPU time of its lcore thread ({" or ".join(LCORE_THREAD)}):\n'
                 f'{text[-2000:]}')
    return Run(p.returncode, text, samples, [(t - started, c, m) for t, c, m in found
                                             if c is not None])


def share_of(name, cpu_ns_used, seconds, text):
    """The share of a CPU that cpu_ns_used over `seconds` is; too small a
    share stops the script (the per-lcore-second rate would divide by it)."""
    share = cpu_ns_used / 1e9 / seconds
    if share < MIN_SHARE:
        sys.exit(f'{name}: its lcore got {share * 100:.1f}% of a CPU over the measured interval; '
                 f'a rate per lcore-second from that is noise:\n{text[-2000:]}')
    return share


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
    # softmrcd counts the packets between two snapshots after 300 ms of
    # warm-up, 2 s apart, and prints the line at once: the lcore's CPU time
    # is taken over the same seconds, back from the moment the line came.
    r = run(cmd, marks=r'linerate \S+: (\d+)-byte frames, ([\d.]+) Mpps, ([\d.]+) Gb/s .*'
                       r'\(\d+ packets in ([\d.]+) s, (\d+) dropped\)')
    if r.code != 0 or len(r.marks) != 1 or r.marks[0][2].group(5) != '0':
        sys.exit(f'softmrcd --linerate {mode} failed (exit {r.code}):\n{r.text}')
    # tx counts data packets sent, resends included (lib/engine/counters.h):
    # a resend would be counted as line rate.
    resent = re.search(r'softmrcd: dut: sent \d+ packets .* retransmitted (\d+)', r.text)
    if resent is None or resent.group(1) != '0':
        sys.exit(f'softmrcd --linerate {mode}: retransmissions, or no summary:\n{r.text}')
    t1, c1, m = r.marks[0]
    seconds = float(m.group(4))
    c0 = r.cpu_at(t1 - seconds)
    if c0 is None:
        sys.exit(f'softmrcd --linerate {mode}: no CPU sample {seconds} s before its line:\n{r.text}')
    share = share_of(f'softmrcd --linerate {mode}', c1 - c0, seconds, r.text)
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), share


# testpmd's forwarding counted from its first statistics past this many
# seconds of polling (ramp-up).
TESTPMD_WARMUP_S = 2.0


def testpmd_pps(vdevs, topology, mbuf_size, seconds):
    """Frames per second dpdk-testpmd io-forwards over the ports `vdevs`,
    all together, and its lcore's CPU share, both over the same interval:
    from its first statistics past TESTPMD_WARMUP_S to the first at least
    `seconds` later, each timestamped with the lcore's CPU time as it came
    (testpmd prints them about every second or two, by its own timer)."""
    cmd = ['stdbuf', '-oL', 'dpdk-testpmd'] + EAL + ['--file-prefix', 'smrcd-bench-testpmd']
    for vdev in vdevs:
        cmd += ['--vdev', vdev]
    cmd += ['--', '--forward-mode=io', f'--port-topology={topology}', '--stats-period', '1',
            '--total-num-mbufs', '16384', '--mbuf-size', str(mbuf_size)]
    n = len(vdevs)

    def prints(marks):
        """(s, CPU ns, RX packets of all ports) of each complete statistics
        print: a NIC statistics block per port, each with its RX-packets."""
        return [(g[-1][0], g[-1][1], sum(int(m.group(1)) for _, _, m in g))
                for g in (marks[i:i + n] for i in range(0, len(marks) - n + 1, n))]

    def span(marks):
        kept = [x for x in prints(marks) if x[0] >= TESTPMD_WARMUP_S]
        for x in kept[1:]:
            if x[0] - kept[0][0] >= seconds:
                return kept[0], x
        return None

    # "RX-packets: N RX-missed:" is the NIC statistics' line, the counter
    # since the port started (the closing forward statistics say RX-dropped).
    r = run(cmd, marks=r'RX-packets:\s+(\d+)\s+RX-missed:', stop=lambda m: span(m) is not None)
    got = span(r.marks)
    if r.code != 0 or got is None:
        sys.exit(f'dpdk-testpmd failed (exit {r.code}) or gave no rates over {seconds} s:\n'
                 + r.text[-3000:])
    (t0, c0, p0), (t1, c1, p1) = got
    return (p1 - p0) / (t1 - t0), share_of('dpdk-testpmd', c1 - c0, t1 - t0, r.text)


def testpmd(args, frame, copy):
    """Mpps of io forwarding on one net_null port and the lcore's CPU share."""
    pps, share = testpmd_pps([f'net_null0,size={frame},copy={copy}'], 'loop', frame + 256,
                             args.seconds)
    return pps / 1e6, share


def measure(args):
    """One run of every row: (name, payload, frame, Mpps, Gb/s, CPU share,
    testpmd Mpps, Gb/s, CPU share, ratio, vs), rates per lcore-second."""
    rows = []

    def row(name, size, frame, mpps, share, base_frame, base_mpps, base_share, vs):
        # Each program's Gb/s is of the frames it forwarded (base_frame for
        # testpmd); the ratio is of those Gb/s, which is the Mpps ratio
        # where the frames are the same size.
        mpps, base_mpps = mpps / share, base_mpps / base_share
        gbps, base_gbps = mpps * frame * 8e-3, base_mpps * base_frame * 8e-3
        rows.append((name, size, frame, mpps, gbps, share, base_mpps, base_gbps, base_share,
                     gbps / base_gbps, vs))

    frame, mpps, _, share = softmrcd(args, 'probe', 4096)
    io, io_share = testpmd(args, frame, 0)
    row('probe (header-only)', '-', frame, mpps, share, frame, io, io_share, 'io')
    for size in PAYLOADS:
        mtu = size if size in VALID_MTUS else 4096
        results = {'rx': softmrcd(args, f'rx:{size}', mtu),
                   'rx-noicrc': softmrcd(args, f'rx:{size}', mtu, icrc=False),
                   'rx-fcs': softmrcd(args, f'rx-fcs:{size}', mtu),
                   'tx': softmrcd(args, f'tx:{size}', mtu)}
        frame = results['rx'][0]
        copy, copy_share = testpmd(args, frame, 1)
        io, io_share = testpmd(args, frame, 0)
        # Gb/s of frames of each mode's own size (tx frames may differ:
        # 178 bytes against rx's 174 at 64 B, the immediate), against
        # testpmd's of the rx frames it ran with.
        for name, (f, mpps, _, share) in results.items():
            row(name, size, f, mpps, share, frame, copy, copy_share, 'copy')
        row('testpmd io', size, frame, io, io_share, frame, io, io_share, 'io')
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
