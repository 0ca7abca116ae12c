#!/usr/bin/env python3
"""The application API: smrc-perf through libsoftmrc next to what softmrcd
does without it, between the same two daemons over net_memif.

Two measurements, each side by side in one invocation:

  overhead  goodput of smrc-perf write_bw (client on daemon b, server on
            daemon a) against softmrcd's own traffic generator (txgen) doing
            the same Writes b -> a: same message size, window per QP, QP
            count, and the same two daemons' configuration (planes, path
            MTU, EV and CC profiles) but for the `traffic` list. smrc-perf's
            goodput is its own (messages x size over first post to last
            completion); txgen's is the requester's completed messages x size
            between two telemetry snapshots (/softmrc/stats on b, each
            stamped with the lcore's own clock), taken after a warm-up
            inside the flow. The ratio is smrc-perf / txgen.
  latency   smrc-perf write_lat round trips (a Write-with-Immediate there,
            one back) next to raw frame round trips over the same kind of
            memif link: bench/memif_ping on b's placement and dpdk-testpmd
            io forwarding on a's, sending per round trip as many frames of
            the same size as one MRC message takes one way.

Both daemons run CC `none` unless --cc nscc: NSCC's defaults read this
CPU-bound pair's descheduled lcores as queueing and shrink the window, so
the goodputs would measure that rather than the API (docs/benchmarks.md).

The pair is test/e2e's: a is every plane's memif server and runs --lcores
0@1,1@0, b the client with 0@0,1@1, so each polling lcore has a CPU. On two
CPUs the applications take their CPU time from those lcores: smrc-perf
sleeps on a completion channel (-e), and the script samples the CPU time
of each daemon's lcore thread and of the applications over the measured
interval and prints the shares. The ratio is of the goodputs as measured:
the CPU the applications take is part of what the API costs here. A second
ratio divides each goodput by the mean share its two lcores got (per
lcore-second, as bench/linerate.py does), which takes out what other
programs on the machine took, and also what the applications took.

--runs N repeats everything N times and prints the median of each cell (a
ratio is the median of the runs' ratios).
Usage: bench/api.py [--build build] [--runs 1] [--sizes 4096,65536,1048576]
                    [--window 16] [--qps 1] [--cc none] [--seconds 2]
                    [--idle-yield-passes 0]
"""

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'dpdk'))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'e2e'))
from api_test import (LCORES, PATH_MTU, outputs, sock, start_pair, stop,  # noqa: E402
                      wait_planes_in_use)
from cpu_time import cpu_ns, lcore_thread  # noqa: E402
from softmrcd_test import Failure, Telemetry, telemetry_socket, wait_for  # noqa: E402

LCORE_THREAD = lcore_thread(1)  # the polling lcore (lcore 1) of softmrcd and memif_ping
# Headers and ICRC of a Write-with-Immediate packet (178-byte frames for 64
# bytes of payload, bench/linerate.py's tx rows).
WIMM_OVERHEAD = 114
LAT_SIZES = [8, 64, 512, 4096]


@contextlib.contextmanager
def daemons(args, traffic):
    """test/e2e's pair of daemons (api_test.start_pair: a is every plane's
    memif server) with the daemons' own QP defaults, `traffic` and the CC
    algorithm chosen; without traffic, once every plane of both is in use.
    Stopped at the end; a Failure meanwhile gets both daemons' whole output."""
    pair = []
    try:
        pair = start_pair(args, qp={}, extra={
            'stats': {'snapshot_ms': 20, 'log_interval_ms': 0},
            'cc_profiles': {'default': {'algorithm': args.cc}},
            'idle_yield_passes': args.idle_yield_passes,
            'traffic': traffic,
        })
        if not traffic:
            # An application's first Writes would otherwise meet planes
            # still down (txgen waits for a probe answer instead).
            for d, me in zip(pair, 'ab'):
                wait_planes_in_use(d, me)
        yield pair
    except Failure as e:
        stop(*pair)
        raise Failure(str(e) + outputs(*pair)) from None
    finally:
        stop(*pair)


class CpuSampler:
    """Samples the daemons' lcores and the applications' processes."""

    def __init__(self, a, b, apps=()):
        self.a, self.b, self.apps = a, b, list(apps)
        self.samples = []

    def sample(self):
        now = time.monotonic()
        lcores = [cpu_ns(d.proc.pid, LCORE_THREAD) for d in (self.a, self.b)]
        for d, cpu in zip('ab', lcores):
            # Not 0: a share computed from it would be wrong, not missing.
            if cpu is None:
                raise Failure(f'daemon {d}: no lcore thread named {" or ".join(LCORE_THREAD)}')
        # An application that exited has no CPU time to read: None, and no
        # share over an interval that ends after it (it would drop by its
        # whole CPU time).
        apps = [cpu_ns(p.pid) for p in self.apps]
        self.samples.append((now, lcores[0], lcores[1], None if None in apps else sum(apps)))

    def shares(self, t0, t1):
        """(a's lcore, b's lcore, the applications) in CPUs over [t0, t1]."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2:
            raise Failure(f'{len(inside)} CPU samples in the measured {t1 - t0:.3f} s')
        first, last = inside[0], inside[-1]
        dt = (last[0] - first[0]) * 1e9
        return tuple(float('nan') if last[k] is None or first[k] is None
                     else (last[k] - first[k]) / dt for k in (1, 2, 3))


def free_port():
    with socket.socket(socket.AF_INET6) as s:
        s.bind(('::1', 0))
        return s.getsockname()[1]


def smrc_perf(args, test, daemon, port, opts, server):
    cmd = [args.smrc_perf, test, '-d', sock(args, f'app-{daemon}'), '--no-progress', '-e',
           '--json', '-p', str(port)]
    return cmd if server else cmd + opts + ['::1']


def run_perf(args, test, opts, sampler=None):
    """smrc-perf server on a, client on b; the client's JSON lines and the
    monotonic time the client exited."""
    port = free_port()
    with tempfile.TemporaryFile('w+') as out_s, tempfile.TemporaryFile('w+') as out_c:
        server = subprocess.Popen(smrc_perf(args, test, 'a', port, opts, True), stdout=out_s,
                                  stderr=subprocess.STDOUT, text=True)
        client = None
        try:
            client = subprocess.Popen(smrc_perf(args, test, 'b', port, opts, False),
                                      stdout=out_c, stderr=subprocess.STDOUT, text=True)
            if sampler:
                sampler.apps = [server, client]
            deadline = time.monotonic() + 120
            while client.poll() is None:
                if sampler:
                    sampler.sample()
                if time.monotonic() > deadline:
                    raise Failure('smrc-perf did not finish')
                time.sleep(0.02)
            ended = time.monotonic()
            server.wait(30)
        finally:
            for p in (client, server):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
        out_c.seek(0)
        out_s.seek(0)
        text_c, text_s = out_c.read(), out_s.read()
    if client.returncode != 0 or server.returncode != 0:
        raise Failure(f'smrc-perf {test}: client exit {client.returncode}: {text_c}\n'
                      f'server exit {server.returncode}: {text_s}')
    return [json.loads(l) for l in text_c.splitlines() if l.startswith('{')], ended


def txgen_goodput(args, size):
    """Gb/s of a txgen Write flow b -> a, and the CPU shares meanwhile."""
    warm, seconds = 0.5, args.seconds
    traffic = [{'from': 'b', 'to': 'a', 'qps': args.qps, 'op': 'write', 'size': size,
                'window': args.window, 'duration_ms': int((warm + seconds + 0.5) * 1000)}]
    with daemons(args, traffic) as (a, b):
        t = Telemetry(telemetry_socket(b.prefix))
        sampler = CpuSampler(a, b)

        def stats():
            sampler.sample()
            return t.query('/softmrc/stats')['b']

        wait_for('txgen completions', lambda: stats()['txgen_completed'] > 0, timeout=10)
        end = time.monotonic() + warm
        while time.monotonic() < end:
            stats()
            time.sleep(0.02)
        s0, t0 = stats(), time.monotonic()
        while time.monotonic() < t0 + seconds:
            stats()
            time.sleep(0.02)
        s1, t1 = stats(), time.monotonic()
        for d in (a, b):
            if d.wait(30) != 0 or 'softmrcd: PASS' not in d.output():
                raise Failure('the txgen run failed')
        # The flow runs duration_ms from b's probe answer (on the lcore's
        # clock, as at_ns): the measured interval must end before the flow
        # does, or it counts the drain and the idle time after it.
        start = re.search(r'softmrcd: t=([\d.]+)s peer \S+ answered a probe .* its flows start',
                          b.output())
    if start is None:
        raise Failure("txgen: b's output does not say when its flow started")
    end_ns = float(start.group(1)) * 1e9 + traffic[0]['duration_ms'] * 1e6
    if s1['at_ns'] > end_ns:
        raise Failure(f'txgen: the measured interval ended at t={s1["at_ns"] / 1e9:.3f}s, after '
                      f'the flow (t={end_ns / 1e9:.3f}s)')
    if s1['txgen_errors'] or s1['txgen_mismatches'] or s1['at_ns'] <= s0['at_ns']:
        raise Failure(f'txgen: {s0} -> {s1}')
    done = (s1['txgen_completed'] - s0['txgen_completed']) * size
    return done * 8 / (s1['at_ns'] - s0['at_ns']), sampler.shares(t0, t1), retx(s1)


def retx(stats):
    """Retransmitted packets per sent packet of endpoint b so far."""
    return stats['retransmits'] / max(1, stats['tx_packets'])


def perf_goodput(args, size, txgen_gbps):
    """Gb/s of smrc-perf write_bw b -> a, about --seconds long at txgen's
    rate, and the CPU shares over its timed part."""
    iters = max(200, int(txgen_gbps * 1e9 / 8 * args.seconds / size / args.qps))
    opts = ['-m', str(size), '-s', str(size), '-n', str(iters), '-w', '20', '-t',
            str(args.window), '-q', str(args.qps), '-c', str(args.signal_every)]
    with daemons(args, []) as (a, b):
        t = Telemetry(telemetry_socket(b.prefix))
        sampler = CpuSampler(a, b)
        (line,), ended = run_perf(args, 'write_bw', opts, sampler)
        resent = retx(t.query('/softmrc/stats')['b'])
    if not line['verified']:
        raise Failure(f'smrc-perf: {line}')
    # The timed part ends with the last completion, just before the client
    # exits; the margins keep setup and the final handshake out.
    s = line['seconds']
    return line['bw_gbps'], sampler.shares(ended - 0.95 * s, ended - 0.05 * s), resent


def write_lat(args):
    """{size: (p50, p99)} of smrc-perf write_lat, in us."""
    opts = ['-m', str(LAT_SIZES[0]), '-s', str(LAT_SIZES[-1]), '-f', '8', '-n',
            str(args.lat_iters), '-w', '200']
    with daemons(args, []) as _:
        lines, _ = run_perf(args, 'write_lat', opts)
    return {l['msg_size']: (l['rtt_us']['p50'], l['rtt_us']['p99']) for l in lines}


def frames(size):
    """(frames, bytes per frame) of one MRC message of `size` bytes one way."""
    n = (size + PATH_MTU - 1) // PATH_MTU
    return n, min(size, PATH_MTU) + WIMM_OVERHEAD


def raw_rtt(args, size):
    """(p50, p99) in us of memif_ping through a dpdk-testpmd of its own."""
    ping_sock = sock(args, 'memif-ping')
    if os.path.exists(ping_sock):
        os.unlink(ping_sock)
    eal = ['--no-huge', '-m', '256', '--no-pci', '--log-level', 'lib.eal:warning']
    # stdbuf: testpmd's output goes to a file, which it would buffer.
    with tempfile.TemporaryFile('w+') as log:
        testpmd = subprocess.Popen(
            ['stdbuf', '-oL', 'dpdk-testpmd', '--lcores', LCORES['a']] + eal + [
                '--file-prefix', 'smrcd-bench-api-testpmd', '--vdev',
                f'net_memif0,role=server,id=0,socket={ping_sock},socket-abstract=no', '--',
                '--forward-mode=io', '--port-topology=loop', '--disable-link-check',
                '--total-num-mbufs', '8192'],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            # Its memif takes a client once its port started: the line after.
            def started():
                log.seek(0)
                return 'Press enter to exit' in log.read() or testpmd.poll() is not None
            wait_for('dpdk-testpmd forwarding', started, timeout=20)
            n, frame = frames(size)
            r = subprocess.run(
                [args.memif_ping, '--lcores', LCORES['b']] + eal + [
                    '--file-prefix', 'smrcd-bench-api-ping', '--vdev',
                    f'net_memif0,role=client,id=0,socket={ping_sock},socket-abstract=no', '--',
                    '--frame', str(frame), '--burst', str(n), '--count', str(args.lat_iters),
                    '--warmup', '200'], capture_output=True, text=True, timeout=60, check=False)
            words = r.stdout.split()
            if r.returncode != 0 or 'p50' not in words:
                log.seek(0)
                raise Failure(f'memif_ping exit {r.returncode}: {r.stdout}{r.stderr[-2000:]}\n'
                              f'--- dpdk-testpmd ---\n{log.read()[-2000:]}')
            return float(words[words.index('p50') + 1]), float(words[words.index('p99') + 1])
        finally:
            if testpmd.poll() is None:
                try:
                    testpmd.communicate('\n', timeout=10)  # "Press enter to exit"
                except subprocess.TimeoutExpired:
                    testpmd.kill()
                    testpmd.wait()


def measure(args):
    rows = []
    for size in args.sizes:
        tx_gbps, tx_cpu, tx_retx = txgen_goodput(args, size)
        perf_gbps, perf_cpu, perf_retx = perf_goodput(args, size, tx_gbps)
        # Per lcore-second: each goodput over the mean share its two lcores got.
        norm = (perf_gbps / ((perf_cpu[0] + perf_cpu[1]) / 2)) / (tx_gbps /
                                                                  ((tx_cpu[0] + tx_cpu[1]) / 2))
        rows.append((size, perf_gbps, perf_cpu, tx_gbps, tx_cpu, perf_gbps / tx_gbps, norm,
                     perf_retx, tx_retx))
    lat = write_lat(args)
    raw = {size: raw_rtt(args, size) for size in LAT_SIZES}
    return rows, [(s, lat[s], raw[s], lat[s][0] / raw[s][0]) for s in LAT_SIZES]


def pct(x):
    return f'{x * 100:.0f}%'


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default='build')
    p.add_argument('--softmrcd', help='default: <build>/app/softmrcd')
    p.add_argument('--smrc-perf', help='default: <build>/app/smrc-perf')
    p.add_argument('--memif-ping', help='default: <build>/bench/memif_ping')
    p.add_argument('--runs', type=int, default=1, help='runs to take the median of')
    p.add_argument('--sizes', default='4096,65536,1048576', help='write_bw message sizes')
    p.add_argument('--window', type=int, default=16, help='Writes outstanding per QP')
    p.add_argument('--qps', type=int, default=1)
    p.add_argument('--cc', choices=('none', 'nscc'), default='none',
                   help="both daemons' CC algorithm (default: none, see the docstring)")
    p.add_argument('--signal-every', type=int, default=1,
                   help="smrc-perf -c (1: a completion per Write, as txgen takes)")
    p.add_argument('--seconds', type=float, default=2, help='measured interval per size')
    p.add_argument('--lat-iters', type=int, default=5000, help='round trips per size')
    p.add_argument('--idle-yield-passes', type=int, default=0,
                   help="both daemons' idle_yield_passes (docs/configuration.md; 0: never)")
    args = p.parse_args()
    args.softmrcd = args.softmrcd or os.path.join(args.build, 'app', 'softmrcd')
    args.smrc_perf = args.smrc_perf or os.path.join(args.build, 'app', 'smrc-perf')
    args.memif_ping = args.memif_ping or os.path.join(args.build, 'bench', 'memif_ping')
    args.sizes = [int(s) for s in args.sizes.split(',')]
    args.case = 'bench'  # the daemons' EAL file prefixes: smrcd-api-bench-a, -b
    print(f'load average before: {os.getloadavg()[0]:.2f}', file=sys.stderr)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            args.workdir = tmp
            runs = [measure(args) for _ in range(max(1, args.runs))]
    except Failure as e:
        sys.exit(f'FAIL: {e}')
    print(f'load average after: {os.getloadavg()[0]:.2f}', file=sys.stderr)

    def med(cells, get):
        return statistics.median(get(c) for c in cells)

    print(f'write_bw b -> a, {args.qps} QP(s), window {args.window}, CC {args.cc}, '
          f'idle_yield_passes {args.idle_yield_passes}, '
          f'smrc-perf -e -c {args.signal_every}; CPU: a lcore / b lcore / applications; '
          'retx: packets b resent per packet it sent\n')
    print('| size B | smrc-perf Gb/s | CPU | retx | txgen Gb/s | CPU | retx | smrc-perf / txgen | '
          'per lcore-second |')
    print('|---|---|---|---|---|---|---|---|---|')
    for cells in zip(*(r[0] for r in runs)):
        cpu = [' / '.join(pct(med(cells, lambda c, i=i, k=k: c[k][i])) for i in range(3))
               for k in (2, 4)]
        print(f'| {cells[0][0]} | {med(cells, lambda c: c[1]):.2f} | {cpu[0]} | '
              f'{med(cells, lambda c: c[7]) * 100:.2f}% | {med(cells, lambda c: c[3]):.2f} | '
              f'{cpu[1]} | {med(cells, lambda c: c[8]) * 100:.2f}% | '
              f'{pct(med(cells, lambda c: c[5]))} | '
              f'{pct(med(cells, lambda c: c[6]))} |')
    print('\nround trips: smrc-perf write_lat -e against memif_ping via testpmd io\n')
    print('| size B | frames x B | write_lat p50 µs | p99 | raw p50 µs | p99 | p50 ratio |')
    print('|---|---|---|---|---|---|---|')
    for cells in zip(*(r[1] for r in runs)):
        n, frame = frames(cells[0][0])
        print(f'| {cells[0][0]} | {n} x {frame} | {med(cells, lambda c: c[1][0]):.1f} | '
              f'{med(cells, lambda c: c[1][1]):.1f} | {med(cells, lambda c: c[2][0]):.1f} | '
              f'{med(cells, lambda c: c[2][1]):.1f} | {med(cells, lambda c: c[3]):.1f}x |')


if __name__ == '__main__':
    main()
