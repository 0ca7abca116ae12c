#!/usr/bin/env python3
"""softmrcd on vdevs: each --case runs the daemon and checks what it says.

  two_endpoints_plane_failure  two endpoints over the in-process fabric; a
                               plane fails and comes back mid-transfer; every
                               byte verified, traffic flowing throughout
  port_lcores                  the same with planes' ports polled by an lcore
                               of their own
  telemetry                    /softmrc/... over the telemetry socket and
                               with dpdk-telemetry.py, values asserted
  demo                         scripts/demo.sh's run of config/softmrcd/demo.yaml:
                               plane 2 fails and returns, plane 3 trims
  interactive                  the prompt, fed on stdin: every command 'help' lists
  interactive_errors           the prompt's refusals: start with no traffic, a
                               command its lcore's full ring did not take
  interactive_stopping         'start' while a stop drains refused
  sigterm                      SIGTERM mid-transfer: in-flight work completes
  sigterm_flush                the same with no drain time: it is flushed
  sigterm_stale_snapshot       SIGTERM before any snapshot shows the transfer:
                               in-flight work still completes
  sigint                       SIGINT mid-transfer, as SIGTERM
  vhost_lsc                    net_vhost ports raise link-status interrupts:
                               plane 1's vhost-user wire killed mid-transfer
                               and brought back; both endpoints' plane 1
                               follows, every byte verified
  setup_signal                 SIGTERM during setup, or while the config file
                               is read: it gives up cleanly, exit 1
  nothing_verified             traffic that never flowed fails (exit 1); -i
                               without 'start' does not
  extbuf                       tx_payload extbuf: payloads sent in place;
                               a link corrupting them changes its own copy
  fabric_impairments           the emulated fabric: rate, delay, random loss,
                               a slow plane that trims, a plane failure; every
                               byte verified, the counters show each of them
  fabric_corruption            a link corrupting payload bytes: under a stale
                               ICRC they are dropped and resent, every byte
                               verified; under a recomputed one the byte
                               check finds them and the run FAILs; a
                               scheduled corruption comes and goes
  fabric_control               /softmrc/fabric/set changes a running link:
                               loss, blackholes, rate factor; counters move
  pdump                        dpdk-dumpcap, a secondary process, captures a
                               port's MRC traffic (hugepages reserved for
                               the case: secondaries cannot attach to
                               --no-huge)
  idle_yield                   idle_yield_passes: an idle lcore leaves its CPU
                               to a busy loop pinned there; without it, not
  rx_drops                     crafted frames replayed into a plane (net_pcap):
                               each bad one counted under its reason in
                               /softmrc/drops and the summary
  bad_config                   bad files rejected with the messages that
                               docs/configuration.md documents
  options                      bad command lines, --help

Configs are written as JSON (a subset of YAML) into --workdir. Every EAL
gets its own --file-prefix (smrcd-<case>). Exit 0 on success, 1 with the
reason and the daemon's output otherwise.
"""

import argparse
import json
import os
import random
import re
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib

EAL = ['-l', '0-1', '--no-huge', '-m', '512', '--no-pci', '--log-level', 'lib.eal:warning']


class Failure(Exception):
    pass


class Skip(Exception):
    """The test cannot run here (exit 77, which meson reports as skipped)."""


def wait_for(what, fn, timeout=5.0, output=''):
    """fn() until it returns something true; that value. Failure after
    `timeout` seconds, with `output` (a daemon's, say) appended."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Failure(f'timed out waiting for {what}' +
                          ('\n--- output ---\n' + output if output else ''))
        time.sleep(0.05)


def test_main(cases, doc, *programs):
    """The main() of every test script: --case NAME runs cases['case_NAME']
    (a script's globals()) with the parsed arguments: --softmrcd, --docs,
    --workdir, and --<program> for each of `programs` (e.g. 'smrcctl')."""
    p = argparse.ArgumentParser(description=doc.split('\n')[0])
    p.add_argument('--softmrcd', required=True)
    for program in programs:
        p.add_argument('--' + program, required=True)
    p.add_argument('--case', required=True)
    p.add_argument('--docs', required=True)
    p.add_argument('--workdir', required=True)
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    try:
        cases['case_' + args.case](args)
    except Skip as e:
        print(f'SKIP {args.case}: {e}')
        return 77
    except Failure as e:
        print(f'FAIL {args.case}: {e}')
        return 1
    print(f'ok {args.case}')
    return 0


def check(cond, what, output=''):
    if not cond:
        raise Failure(what + ('\n--- output ---\n' + output if output else ''))


def plane(ep, p):
    side = {'a': 0xa, 'b': 0xb}[ep]
    return {'mac': f'02:00:00:00:{side:02x}:{p:02x}', 'ip': f'fd00:0:0:{p:x}::{side:x}'}


def two_endpoints(planes=2, **extra):
    """Endpoints a and b joined by link 0, one flow a -> b."""
    cfg = {
        'path_mtu': 1024,
        'stats': {'snapshot_ms': 20, 'log_interval_ms': 100},
        'endpoints': [{'name': e, 'planes': [plane(e, p) for p in range(planes)]}
                      for e in ('a', 'b')],
        'links': [{'endpoints': ['a', 'b']}],
        'ev_profiles': {'default': {'evs_per_plane': 4, 'min_active': 2}},
        'traffic': [{'from': 'a', 'to': 'b', 'qps': 2, 'op': 'wimm', 'size': 16384,
                     'window': 4, 'duration_ms': 1500}],
    }
    for key, value in extra.items():
        cfg[key] = value
    return cfg


class Daemon:
    def __init__(self, args, name, cfg=None, extra_eal=(), stdin=None, eal=EAL):
        self.prefix = 'smrcd-' + name.replace('_', '-')
        self.cfg_path = os.path.join(args.workdir, name + '.yaml')
        if cfg is not None:
            with open(self.cfg_path, 'w') as f:
                json.dump(cfg, f, indent=1)
        self.cmd = [args.softmrcd] + list(eal) + list(extra_eal) + ['--file-prefix', self.prefix,
                                                           '--', '--config', self.cfg_path]
        self.stdin = stdin

    def run(self, extra=(), timeout=30):
        r = subprocess.run(self.cmd + list(extra), capture_output=True, text=True,
                           timeout=timeout, check=False)
        return r.returncode, r.stdout, r.stderr

    def start(self, extra=()):
        self.proc = subprocess.Popen(self.cmd + list(extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=self.stdin)
        self.lines = []
        self.pending = b''
        self.consumed = 0  # lines before this were matched or passed over
        self.killed = False  # by kill(), on purpose
        self.hung = False  # killed by wait(), past its timeout
        return self

    def _read(self, timeout):
        """Appends the complete lines that arrive within `timeout` s; False at EOF."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return True
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            return False
        *done, self.pending = (self.pending + chunk).split(b'\n')
        self.lines += [l.decode(errors='replace').replace('\r', '') for l in done]
        return True

    def read_until(self, pattern, timeout=15):
        """Reads output until a line after the last match matches; returns the match."""
        deadline = time.monotonic() + timeout
        seen = self.consumed
        while True:
            for i in range(seen, len(self.lines)):
                m = re.search(pattern, self.lines[i])
                if m:
                    self.consumed = i + 1
                    return m
            seen = len(self.lines)
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.1)):
                break
        raise Failure(f'no line matching {pattern!r}\n--- output ---\n' + self.output())

    def wait(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self._read(0.1):
            if time.monotonic() > deadline:
                self.hung = True
                self.proc.kill()
                raise Failure('softmrcd did not exit\n--- output ---\n' + self.output())
        self.lines.append(self.pending.decode(errors='replace'))
        return self.proc.wait()

    def output(self):
        return '\n'.join(self.lines)

    def quit(self):
        """Types 'quit' at the prompt (-i, standard input a pipe) and waits
        for the exit; its status."""
        self.proc.stdin.write(b'quit\n')
        self.proc.stdin.flush()
        return self.wait()

    def blocked_on_fifo(self):
        """True while the process waits in open() for a FIFO's writer."""
        with open(f'/proc/{self.proc.pid}/wchan') as f:
            return f.read() == 'wait_for_partner'

    def signal_when(self, ready, sig=signal.SIGTERM):
        """Sends `sig` once ready() returned, and waits for the exit; the exit
        status and the output. The process never outlives the call."""
        try:
            ready()
            self.proc.send_signal(sig)
            code = self.wait()
        finally:
            self.kill()
        return code, self.output()

    def kill(self):
        self.killed = True
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def summary_counts(output):
    m = re.search(r'txgen: (\d+) messages posted, (\d+) completed, (\d+) verified .* '
                  r'(\d+) mismatches, (\d+) errors, (\d+) flushed', output)
    check(m is not None, 'no txgen summary', output)
    keys = ('posted', 'completed', 'verified', 'mismatches', 'errors', 'flushed')
    return dict(zip(keys, map(int, m.groups())))


LOG = re.compile(r'^softmrcd: t=([\d.]+)s a\[.*planes (\d+) .*\] b\[.*planes (\d+) .*\] '
                 r'txgen verified (\d+) \(\+(\d+)\) [\d.]+ Gb/s errors (\d+)$')


def plane_failure_config():
    """Two endpoints on 4 planes; plane 2 down from 0.4 s to 0.9 s."""
    cfg = two_endpoints(planes=4)
    cfg['links'][0]['schedule'] = [{'at_ms': 400, 'plane': 2, 'state': 'down'},
                                   {'at_ms': 900, 'plane': 2, 'state': 'up'}]
    return cfg


def check_plane_failure(code, out, err):
    """What every run of plane_failure_config() must show."""
    both = out + err
    check(code == 0, f'exit status {code}', both)
    check('softmrcd: PASS' in out, 'no PASS line', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['completed'] == s['posted'],
          f'not every message was verified: {s}', both)
    check(s['mismatches'] == 0 and s['errors'] == 0, f'errors: {s}', both)
    for ep in ('a', 'b'):
        check(re.search(rf't=0\.\d+s {ep} plane 2 down \(link down\)', out),
              f'{ep} did not see plane 2 go down', both)
        # At 0.9 s by the schedule; later only when the machine held the lcore back.
        check(re.search(rf't=(0\.9|1\.0)\d*s {ep} plane 2 up \(link up\)', out),
              f'{ep} did not see plane 2 come back', both)
    logs = [m for m in map(LOG.match, out.splitlines()) if m]
    during = [m for m in logs if 0.55 <= float(m.group(1)) <= 0.88]
    after = [m for m in logs if float(m.group(1)) >= 1.05]
    check(during and all(m.group(2) == m.group(3) == '1101' for m in during),
          'planes not shown as 1101 while plane 2 was down', both)
    check(any(int(m.group(5)) > 0 for m in during),
          'no message was verified while plane 2 was down', both)
    check(after and all(m.group(2) == '1111' for m in after), 'plane 2 not back in use', both)
    check(any(int(m.group(5)) > 0 for m in after), 'no traffic after plane 2 came back', both)


def case_two_endpoints_plane_failure(args):
    check_plane_failure(*Daemon(args, 'plane_failure', plane_failure_config()).run())


def demo_command(args, prefix):
    """scripts/demo.sh's softmrcd command line, with this softmrcd, file
    prefix `prefix` and no extra arguments, and the prefix demo.sh uses."""
    root = os.path.join(args.docs, '..')
    with open(os.path.join(root, 'scripts', 'demo.sh')) as f:
        script = f.read().replace('\\\n', ' ')
    line = next((l for l in script.splitlines() if l.startswith('exec ')), None)
    check(line is not None, 'no exec line in scripts/demo.sh', script)
    argv = shlex.split(line)[1:]
    check(argv[0] == 'build/app/softmrcd' and argv[-1] == '$@' and '--file-prefix' in argv,
          f'scripts/demo.sh runs {argv}')
    i = argv.index('--file-prefix')
    script_prefix = argv[i + 1]
    argv[i + 1] = prefix
    return [os.path.abspath(args.softmrcd)] + argv[1:-1], script_prefix


def case_demo(args):
    """The README's demo as scripts/demo.sh runs it (config/softmrcd/demo.yaml,
    about 20 s): plane 2 fails near t=8 s and comes back near t=14 s, plane 3
    trims, every message verified. Times allow for a loaded machine."""
    cmd, script_prefix = demo_command(args, 'smrcd-demo-test')
    with open(os.path.join(args.docs, 'daemon.md')) as f:
        doc = f.read()
    check(f'--file-prefix {script_prefix} \\\n  -- --config config/softmrcd/demo.yaml' in doc,
          f'docs/daemon.md does not run the demo with --file-prefix {script_prefix}')
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=150, check=False,
                       cwd=os.path.join(args.docs, '..'))
    out, both = r.stdout, r.stdout + r.stderr
    check(r.returncode == 0, f'exit status {r.returncode}', both)
    m = re.search(r'^softmrcd: PASS: ([\d.]+) GiB verified, every byte checked, 0 errors', out,
                  re.M)
    check(m is not None and float(m.group(1)) > 0, 'no PASS line with bytes verified', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['completed'] == s['posted'] and
          s['mismatches'] == s['errors'] == 0, f'not every message verified: {s}', both)
    logs = [m for m in map(LOG.match, out.splitlines()) if m]
    check(len(logs) >= 10 and all(m.group(6) == '0' for m in logs),
          f'{len(logs)} live lines (want 10 or more), or errors in them', both)
    for ep in ('a', 'b'):
        down = re.search(rf'^softmrcd: t=([\d.]+)s {ep} plane 2 down \(link down\)$', out, re.M)
        up = re.search(rf'^softmrcd: t=([\d.]+)s {ep} plane 2 up \(link up\)$', out, re.M)
        check(down and 7.9 <= float(down[1]) <= 10, f'{ep}: plane 2 did not go down near 8 s', both)
        check(up and 13.9 <= float(up[1]) <= 16, f'{ep}: plane 2 did not come back near 14 s',
              both)
    during = [m for m in logs if float(down[1]) + 0.5 <= float(m.group(1)) <= 13.9]
    check(during and all(m.group(2) == m.group(3) == '1101' for m in during) and
          any(int(m.group(5)) > 0 for m in during),
          'plane 2 not out of use, or nothing verified, while it was down', both)
    after = [m for m in logs if float(m.group(1)) >= float(up[1]) + 0.5]
    check(after and any(m.group(2) == '1111' and int(m.group(5)) > 0 for m in after),
          'plane 2 not back in use with traffic', both)
    trims = [int(n) for n in re.findall(r'^softmrcd: t=[\d.]+s link 0: .*\| p3 [\d.]+ Gb/s trims (\d+)', out, re.M)]
    check(sum(trims) > 0, 'plane 3 trimmed nothing', both)
    check(link_totals(out)['trims'] > 0, 'the link summary counts no trims', both)


def case_port_lcores(args):
    """Planes' ports on an lcore of their own: all of a's and b's plane 1 on
    lcore 2 (b names its own lcore for plane 0: polled directly), the endpoints
    on lcore 1 (each lcore on a CPU of its own but for
    the control thread). Only the port lcore moves a's frames, so every
    message verified crossed it; the plane failure reaches the endpoints
    through it."""
    cfg = plane_failure_config()
    cfg['mempool'] = {'mbufs': 16383}
    a, b = cfg['endpoints']
    a['lcore'] = b['lcore'] = 1
    for p in a['planes']:
        p['lcore'] = 2
    b['planes'][1]['lcore'] = 2
    b['planes'][0]['lcore'] = 1  # its own lcore: polled directly
    eal = ['--lcores', '0@0,1@1,2@0'] + EAL[2:]
    check_plane_failure(*Daemon(args, 'port_lcores', cfg, eal=eal).run())


def case_linerate(args):
    """--linerate on the shipped net_null configuration (bench/linerate.py's
    modes): each measures packets, drops none and exits 0; tx also with a
    send queue smaller than qp.max_wimm, which bounds its window. rx-fcs
    checks every frame's ICRC through the FCS behind it, rx none."""
    with open(os.path.join(args.docs, '..', 'config', 'softmrcd', 'linerate-null.yaml')) as f:
        shipped = f.read()
    for name, mode, extra in (('probe', 'probe', ''), ('rx', 'rx:4096', ''),
                              ('rx_fcs', 'rx-fcs:4096', ''), ('tx', 'tx:4096', ''),
                              ('tx_small_sq', 'tx:64', 'limits: {max_send_wr: 8}\n')):
        d = Daemon(args, 'linerate_' + name)
        with open(d.cfg_path, 'w') as f:
            f.write(shipped + extra)
        code, out, err = d.run(['--linerate', mode], timeout=60)
        m = re.search(r'linerate (\S+): \d+-byte frames, [\d.]+ Mpps, [\d.]+ Gb/s on lcore \d+ '
                      r'\((\d+) packets in [\d.]+ s, (\d+) dropped\); of (\d+) frames received, '
                      r'(\d+) ICRC-checked through their FCS, (\d+) with a wrong FCS', out + err)
        check(code == 0 and m is not None and m.group(1) == mode.split(':')[0] and
              int(m.group(2)) > 0 and int(m.group(3)) == 0, f'{name}: exit {code}', out + err)
        received, from_fcs, fcs_wrong = (int(m.group(k)) for k in (4, 5, 6))
        want_from_fcs = received if mode.startswith('rx-fcs') else 0
        check(received > 0 and from_fcs == want_from_fcs and fcs_wrong == 0,
              f'{name}: {from_fcs} of {received} frames checked through their FCS, '
              f'{fcs_wrong} with a wrong one (want {want_from_fcs}, 0)', out + err)
        print(m.group(0))


def case_extbuf(args):
    """Zero-copy TX: payloads leave from registered memory as external buffers;
    the receiver (a ring port passes the chain on) makes each frame contiguous."""
    cfg = two_endpoints(tx_payload='extbuf')
    cfg['traffic'][0]['duration_ms'] = 800
    code, out, err = Daemon(args, 'extbuf', cfg).run()
    both = out + err
    check(code == 0 and 'softmrcd: PASS' in out, f'exit status {code}', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['posted'], f'not all verified: {s}', both)
    m = re.search(r'softmrcd: a: sent (\d+) packets \((\d+) with the payload sent in place\)',
                  out)
    check(m is not None and int(m.group(2)) > 0, 'no payload was sent in place', both)
    m = re.search(r'softmrcd: b: sent (\d+) packets \((\d+) with', out)
    check(m is not None and m.group(2) == '0', 'b sends only ACKs, never a payload', both)

    # A link that corrupts them changes its own copy, never a's memory: b
    # drops the frames (stale ICRC), a resends from its memory, and every
    # byte arrives right.
    cfg['links'][0].update({'corrupt': 0.02, 'corrupt_icrc': 'keep'})
    code, out, err = Daemon(args, 'extbuf_corrupt', cfg).run()
    both = out + err
    check(code == 0 and 'softmrcd: PASS' in out, f'corrupt: exit status {code}', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['posted'] and s['mismatches'] == 0,
          f'corrupt: not all verified: {s}', both)
    n, (_, b_dropped) = link_totals(out)['corrupted'], frames_in(out)['b']
    check(n > 0 and b_dropped > 0 and 'chained frames drawn' not in out,
          f'corrupt: {n} corrupted, b dropped {b_dropped}', both)
    check(retransmitted(out, 'a') > 0, 'corrupt: a retransmitted nothing', both)
    m = re.search(r'softmrcd: a: sent (\d+) packets \((\d+) with the payload sent in place\)',
                  out)
    check(m is not None and int(m.group(2)) > 0, 'corrupt: no payload was sent in place', both)


def case_vlan(args):
    """Planes on 802.1Q VLANs (one with a priority): the transfer verifies
    every byte, and no frame is dropped for its VLAN or its address."""
    cfg = two_endpoints()
    for e in cfg['endpoints']:
        e['planes'][0].update(vlan=10, vlan_pcp=3)
        e['planes'][1].update(vlan=4094)
    cfg['traffic'][0]['duration_ms'] = 800
    run_without_drops(args, 'vlan', cfg)


def run_without_drops(args, name, cfg=None, config_file=None):
    """Runs cfg, or the file config_file (endpoints a and b, a flow a -> b),
    to the end: every message verified, and both ends took every frame they
    received. The output."""
    d = Daemon(args, name, cfg)
    if config_file:
        d.cmd[d.cmd.index(d.cfg_path)] = config_file
    code, out, err = d.run()
    both = out + err
    check(code == 0 and 'softmrcd: PASS' in out, f'exit status {code}', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['posted'], f'not all verified: {s}', both)
    ends = frames_in(out)
    check(sorted(ends) == ['a', 'b'], 'no end-of-run counts for a and b', both)
    check(all(rx > 0 and dropped == 0 for rx, dropped in ends.values()),
          f'frames dropped: {ends}', both)
    return both


def frames_in(output):
    """Per endpoint, from the end-of-run counts: (frames received, dropped)."""
    return {e: (int(rx), int(dropped)) for e, rx, dropped in re.findall(
        r'softmrcd: (\w+): sent \d+ packets .*received (\d+), dropped (\d+)', output)}


def case_srv6(args):
    """config/softmrcd/srv6.yaml, the SRv6 example: each EV is a uSID path in
    the plane's block, the emulated plane's switches route on it and shift
    it away, so frames arrive addressed to the receiver (rewritten
    destinations, ICRC intact). Blackholing one path (uSID 0xc001) takes
    that EV out of a's QPs."""
    example = os.path.join(args.docs, '..', 'config', 'softmrcd', 'srv6.yaml')
    both = run_without_drops(args, 'srv6', config_file=example)
    link = re.search(r'link 0: delivered \d+ packets .* trimmed (\d+), .*\(ev_blackhole (\d+)\)',
                     both)
    check(link is not None and int(link[1]) > 0 and int(link[2]) > 0,
          'no trims, or nothing sent on the blackholed path', both)
    last = re.findall(r'a\[.* evs (\d+)/(\d+)\] b\[.* evs (\d+)/(\d+)\]', both)
    check(last and last[-1] == ('14', '16', '16', '16'),
          f"path 0xc001 is not out of both of a's QPs (and only it): {last[-1:]}", both)


class HugePages:
    """Reserves `pages` 2 MiB pages and mounts a hugetlbfs for one case;
    undoes both on exit. Skip where the kernel cannot give them."""
    NR = '/proc/sys/vm/nr_hugepages'

    def __init__(self, workdir, pages):
        self.dir = os.path.join(workdir, 'huge')
        self.pages = pages

    def __enter__(self):
        try:
            with open(self.NR) as f:
                self.before = int(f.read())
            with open(self.NR, 'w') as f:
                f.write(str(self.before + self.pages))
            with open(self.NR) as f:
                got = int(f.read()) - self.before
        except OSError as e:
            raise Skip(f'cannot reserve hugepages: {e}')
        if got < self.pages:
            self._release()
            raise Skip(f'the kernel gave {got} of {self.pages} hugepages')
        os.makedirs(self.dir, exist_ok=True)
        mount = subprocess.run(['mount', '-t', 'hugetlbfs', '-o', 'pagesize=2M', 'nodev',
                                self.dir], capture_output=True, text=True, check=False)
        if mount.returncode != 0:
            self._release()
            raise Skip(f'cannot mount hugetlbfs: {mount.stderr.strip()}')
        return self

    def __exit__(self, *exc):
        subprocess.run(['umount', self.dir], check=False)
        self._release()

    def _release(self):
        with open(self.NR, 'w') as f:
            f.write(str(self.before))


def case_pdump(args):
    """dpdk-dumpcap attaches to a running softmrcd and captures one port's
    traffic both ways: Writes out, ACKs in, which the project's Wireshark
    dissector decodes."""
    dumpcap = shutil.which('dpdk-dumpcap')
    tshark = shutil.which('tshark')
    if not dumpcap or not tshark:
        raise Skip('dpdk-dumpcap or tshark is not installed (scripts/setup.sh installs both)')
    dissector = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                             'scripts', 'wireshark', 'softmrc.lua')
    cfg = two_endpoints()
    cfg['traffic'][0]['duration_ms'] = 3000
    pcap = os.path.join(args.workdir, 'a_p0.pcapng')
    with HugePages(args.workdir, 300) as huge:
        # A secondary must map the primary's memory at the same addresses.
        # EAL's default hint (4 GiB) lies in ASan's shadow, so under ASan the
        # primary's memory would land among the 0x7f... mappings, where the
        # secondary's own libraries may already be: pick a place above both.
        base = 0x200000000000
        eal = [a for a in EAL if a != '--no-huge'] + ['--huge-dir', huge.dir,
                                                      '--base-virtaddr', hex(base)]
        d = Daemon(args, 'pdump', cfg, eal=eal).start()
        try:
            d.read_until(r'txgen verified [1-9]')
            with open(f'/proc/{d.proc.pid}/maps') as f:
                huge_maps = [l for l in f if huge.dir in l]
            check(huge_maps and all(base <= int(l.split('-')[0], 16) < 2 * base
                                    for l in huge_maps),
                  f'hugepages not mapped near --base-virtaddr {base:#x}', ''.join(huge_maps))
            cap = subprocess.run([dumpcap, '--file-prefix', d.prefix, '-i', 'net_ring_ring_a_p0',
                                  '-c', '200', '-w', pcap],
                                 capture_output=True, text=True, timeout=30, check=False)
            check(cap.returncode == 0, f'dpdk-dumpcap exit {cap.returncode}',
                  cap.stdout + cap.stderr)
            code = d.wait()
        finally:
            d.kill()
    both = d.output()
    check(code == 0 and 'softmrcd: PASS' in both, f'softmrcd exit status {code}', both)
    shown = subprocess.run([tshark, '-r', pcap, '-X', 'lua_script:' + dissector, '-T', 'fields',
                            '-e', '_ws.col.Protocol', '-e', '_ws.col.Info'],
                           capture_output=True, text=True, check=False, env=dict(
                               os.environ, HOME=args.workdir, WIRESHARK_CONFIG_DIR=args.workdir))
    frames = [l.split('\t', 1) for l in shown.stdout.splitlines()]
    check(len(frames) >= 200, f'{len(frames)} frames captured, want 200', shown.stderr)
    check(all(proto == 'softmrc' for proto, _ in frames),
          'a frame the dissector does not take for MRC', shown.stdout)
    writes = sum('WRITE' in info.upper() for _, info in frames)
    acks = sum(info.startswith('ACK') for _, info in frames)
    check(writes > 0 and acks > 0,
          f'want Writes out and ACKs in: {writes} Writes, {acks} ACKs', shown.stdout[:2000])


def link_totals(output):
    """The summary's line for link 0: delivered, trimmed, CE-marked, drops by
    reason, corrupted (0 when the line names none)."""
    m = re.search(r'softmrcd: link 0: delivered (\d+) packets \(([\d.]+) MiB of payload\), '
                  r'trimmed (\d+), CE-marked (\d+), dropped (\d+)(?: \((.*?)\))?'
                  r'(?:; corrupted (\d+))?(?:; \d+ chained frames .*)?$', output, re.M)
    check(m is not None, 'no link summary', output)
    totals = {'packets': int(m.group(1)), 'trims': int(m.group(3)), 'ce_marks': int(m.group(4)),
              'drops': int(m.group(5)), 'corrupted': int(m.group(7) or 0)}
    for item in (m.group(6) or '').split(', '):
        if item:
            reason, n = item.rsplit(' ', 1)
            totals['drop_' + reason] = int(n)
    return totals


def retransmitted(output, ep):
    m = re.search(rf'softmrcd: {ep}: sent .* retransmitted (\d+)$', output, re.M)
    check(m is not None, f'no summary line for {ep}', output)
    return int(m.group(1))


def case_fabric_impairments(args):
    """Four 0.5 Gb/s planes with 50 us of delay each way: plane 1 loses 1% of
    its packets at random, plane 3 is slower with a small buffer and trims,
    plane 2 is down from 0.5 s to 0.9 s. Everything arrives and is checked."""
    cfg = two_endpoints(planes=4)
    cfg['links'][0].update({
        'rate_gbps': 0.5, 'delay_us': 50, 'buffer_kib': 128, 'ecn_kib': 32, 'overflow': 'trim',
        'planes': [{'plane': 1, 'loss': 0.01},
                   {'plane': 3, 'rate_gbps': 0.15, 'buffer_kib': 12, 'ecn_kib': 4}],
        'schedule': [{'at_ms': 500, 'plane': 2, 'state': 'down', 'for_ms': 400}]})
    code, out, err = Daemon(args, 'fabric_impairments', cfg).run()
    both = out + err
    check(code == 0 and 'softmrcd: PASS' in out, f'exit status {code}', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['completed'] == s['posted'],
          f'not every message was verified: {s}', both)
    check(s['mismatches'] == 0 and s['errors'] == 0, f'errors: {s}', both)
    for ep in ('a', 'b'):
        check(re.search(rf't=[\d.]+s {ep} plane 2 down \(link down\)', out),
              f'{ep} did not see plane 2 go down', both)
        check(re.search(rf't=[\d.]+s {ep} plane 2 up \(link up\)', out),
              f'{ep} did not see plane 2 come back', both)
    t = link_totals(out)
    check(t['trims'] > 0, f'plane 3 trimmed nothing: {t}', both)
    check(t['ce_marks'] > 0, f'nothing was CE-marked: {t}', both)
    check(t.get('drop_loss', 0) > 0, f'plane 1 lost nothing: {t}', both)
    check(retransmitted(out, 'a') > 0, 'a retransmitted nothing', both)
    # The rate limit holds: 4 x 0.5 Gb/s less the failed plane's share.
    m = re.search(r'; ([\d.]+) s, ([\d.]+) Gb/s verified', out)
    check(m is not None and 0 < float(m.group(2)) <= 2.0, 'goodput above the fabric\'s rate', both)
    check(re.search(r'softmrcd: link 0 plane 2 down at t=[\d.]+s: ', out),
          'no goodput report for the plane failure', both)


def case_fabric_corruption(args):
    """A link that corrupts payload bytes. With a stale ICRC (keep) b drops
    the frames as rx_bad_icrc, a resends them and every byte arrives right;
    with a recomputed one b takes the wrong bytes and only the traffic
    generator's byte check finds them: the run FAILs."""
    cfg = two_endpoints()
    cfg['links'][0].update({'corrupt': 0.03, 'corrupt_icrc': 'keep'})
    cfg['traffic'][0]['duration_ms'] = 0  # until SIGTERM
    d = Daemon(args, 'fabric_corruption_keep', cfg).start(['--log-interval-ms', '0'])

    def corrupted_and_refused():
        t = Telemetry(telemetry_socket(d.prefix))
        wait_for('b to verify messages and drop bad ICRCs', lambda: (
            t.query('/softmrc/stats,b')['b']['txgen_verified'] > 100 and
            t.query('/softmrc/drops,b')['b']['rx_bad_icrc'] > 0), timeout=15, output=d.output())
        links = t.query('/softmrc/links')
        check(sum(links[f'link0/{p}']['a_to_b_corrupted'] for p in (0, 1)) > 0 and
              links['link0/0']['a_to_b_corrupt'] == '0.03' and
              links['link0/0']['a_to_b_corrupt_icrc'] == 'keep', f'/softmrc/links: {links}')
        # ACKs (b to a) carry no payload: never corrupted.
        check(all(links[f'link0/{p}']['b_to_a_corrupted'] == 0 for p in (0, 1)),
              f'ACKs corrupted: {links}')

    code, out = d.signal_when(corrupted_and_refused)
    check(code == 0, 'exit status after SIGTERM', out)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['completed'] == s['posted'] and
          s['mismatches'] == 0 and s['errors'] == 0, f'keep: not every message verified: {s}', out)
    n, (_, b_dropped) = link_totals(out)['corrupted'], frames_in(out)['b']
    check(n > 0 and b_dropped > 0, f'keep: {n} corrupted, b dropped none', out)
    check(retransmitted(out, 'a') > 0, 'keep: a retransmitted nothing', out)

    cfg['links'][0].update({'corrupt': 0.001, 'corrupt_icrc': 'recompute'})
    cfg['traffic'][0]['duration_ms'] = 1000
    code, out, err = Daemon(args, 'fabric_corruption_recompute', cfg).run()
    both = out + err
    check(code == 1 and 'softmrcd: FAIL' in out, f'recompute: exit status {code}', both)
    s = summary_counts(out)
    check(s['mismatches'] > 0 and 'has wrong bytes' in err, f'recompute: no mismatch: {s}', both)
    # The fresh ICRC held: b dropped nothing, it took the wrong bytes.
    n, (_, b_dropped) = link_totals(out)['corrupted'], frames_in(out)['b']
    check(n > 0 and b_dropped == 0, f'recompute: {n} corrupted, b dropped {b_dropped}', both)

    # On the schedule: plane 1 corrupts a's frames from 200 ms for 300 ms.
    cfg['links'][0].update({'corrupt': 0, 'corrupt_icrc': 'keep', 'schedule': [
        {'at_ms': 200, 'plane': 1, 'corrupt': 0.05, 'direction': 'a_to_b', 'for_ms': 300}]})
    code, out, err = Daemon(args, 'fabric_corruption_schedule', cfg).run()
    both = out + err
    check(code == 0 and 'softmrcd: PASS' in out, f'schedule: exit status {code}', both)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['verified'] == s['completed'] == s['posted'] and
          s['mismatches'] == 0 and s['errors'] == 0, f'schedule: not every message verified: {s}',
          both)
    on, off = (re.search(rf't=([\d.]+)s link 0 plane 1 corrupt {p} \(a_to_b\)$', out, re.M)
               for p in (r'0\.05', '0'))
    check(on and off and float(off.group(1)) - float(on.group(1)) >= 0.299,
          'schedule: corruption not on for 300 ms', both)
    n, (_, b_dropped) = link_totals(out)['corrupted'], frames_in(out)['b']
    check(n > 0 and b_dropped > 0, f'schedule: {n} corrupted, b dropped {b_dropped}', both)


def case_fabric_control(args):
    cfg = two_endpoints()
    cfg['links'][0].update({'rate_gbps': 1, 'delay_us': 20})
    cfg['traffic'][0]['duration_ms'] = 0  # until SIGTERM
    d = Daemon(args, 'fabric_control', cfg).start(['--log-interval-ms', '0'])
    try:
        t = Telemetry(telemetry_socket(d.prefix))

        def plane_row(p):
            return t.query('/softmrc/links')[f'link0/{p}']

        def grows(p, key, what):
            first = plane_row(p)[key]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.2)
                row = plane_row(p)
                if row[key] > first:
                    return row
            raise Failure(f'{key} did not grow after {what}: {row}')

        row = plane_row(0)
        check(row['base_rtt_ns'] == 2 * 20000 + (1024 + 240) * 8 and row['a_to_b_loss'] == '0' and
              row['a_to_b_drops'] == 0, f'/softmrc/links before: {row}')
        reply = t.query('/softmrc/fabric/set,0,0,loss,0.2')
        check(reply == {'link0/0': {'requested': 'loss 0.2'}}, f'set loss: {reply}')
        row = grows(0, 'a_to_b_drop_loss', 'loss 0.2')
        check(row['a_to_b_loss'] == '0.2' and row['b_to_a_loss'] == '0.2', f'loss: {row}')
        # -0 is 0, said without its sign.
        reply = t.query('/softmrc/fabric/set,0,0,loss,-0')
        check(reply == {'link0/0': {'requested': 'loss 0'}}, f'set loss -0: {reply}')
        # Corruption with a stale ICRC: frames corrupted, and refused by b.
        reply = t.query('/softmrc/fabric/set,0,0,corrupt,0.2,a_to_b')
        check(reply == {'link0/0': {'requested': 'corrupt 0.2 (a_to_b)'}}, f'corrupt: {reply}')
        row = grows(0, 'a_to_b_corrupted', 'corrupt 0.2')
        check(row['a_to_b_corrupt'] == '0.2' and row['b_to_a_corrupt'] == '0' and
              row['a_to_b_corrupt_icrc'] == 'keep', f'corrupt: {row}')
        t.query('/softmrc/fabric/set,0,0,corrupt,0')
        # The ICRC's fate is a setting of its own (no frame corrupted here).
        reply = t.query('/softmrc/fabric/set,0,1,corrupt_icrc,recompute')
        check(reply == {'link0/1': {'requested': 'corrupt_icrc recompute'}},
              f'corrupt_icrc: {reply}')
        wait_for('corrupt_icrc recompute in /softmrc/links',
                 lambda: plane_row(1)['b_to_a_corrupt_icrc'] == 'recompute', output=d.output())
        check(plane_row(0)['a_to_b_corrupt'] == '0', f'corrupt not off: {plane_row(0)}')
        drops = t.query('/softmrc/drops,b')['b']
        check(drops['rx_bad_icrc'] > 0, f'b dropped no bad ICRC: {drops}')
        reply = t.query('/softmrc/fabric/set,0,1,blackhole,on,a_to_b')
        check(reply == {'link0/1': {'requested': 'blackhole on (a_to_b)'}}, f'blackhole: {reply}')
        row = grows(1, 'a_to_b_drop_blackhole', 'blackhole on')
        check(row['a_to_b_blackhole'] == 1 and row['b_to_a_blackhole'] == 0, f'blackhole: {row}')
        t.query('/softmrc/fabric/set,0,1,blackhole,off,a_to_b')
        # EV 0 of plane 0 rides in UDP source port 49152 (ev_profiles.default).
        t.query('/softmrc/fabric/set,0,0,blackhole_ev,49152')
        row = grows(0, 'a_to_b_drop_ev_blackhole', 'blackhole_ev 49152')
        check(row['a_to_b_blackholed_evs'] == 1, f'blackhole_ev: {row}')
        t.query('/softmrc/fabric/set,0,0,restore_ev,49152')
        # The reply names the row as /softmrc/links does, however spelt.
        reply = t.query('/softmrc/fabric/set,00,01,rate_factor,0.5')
        check(reply == {'link0/1': {'requested': 'rate_factor 0.5'}}, f'rate_factor: {reply}')
        deadline = time.monotonic() + 5
        while plane_row(1)['a_to_b_rate_factor'] != '0.5' and time.monotonic() < deadline:
            time.sleep(0.1)
        row = plane_row(0)
        check(row['a_to_b_blackholed_evs'] == 0 and row['a_to_b_loss'] == '0',
              f'not restored: {row}')
        check(plane_row(1)['a_to_b_rate_factor'] == '0.5', f'rate_factor: {plane_row(1)}')
        for params, error in [
            ('0,0,loss,2', "loss '2' is not a probability 0..1"),
            ('0,0,loss', 'expected <link>,<plane>,<what>,<value>[,<direction>]'),
            ('0,0,jitter,1', "'jitter' is not state, loss, blackhole, blackhole_ev, restore_ev, "
                             "rate_factor, corrupt or corrupt_icrc"),
            ('0,0,corrupt,1.5', "corrupt '1.5' is not a probability 0..1"),
            ('0,0,corrupt_icrc,fix', "corrupt_icrc 'fix' is not keep or recompute"),
            ('0,0,blackhole,maybe', "blackhole 'maybe' is not on or off"),
            ('0,0,state,down,a_to_b', 'a plane goes down or up in both directions'),
            ('0,0,loss,0.1,up', "direction 'up' is not both, a_to_b or b_to_a"),
            ('3,0,loss,0.1', 'no link 3 (there are 1)'),
            ('0,9,loss,0.1', 'no plane 9 (planes are 0..1)'),
            # Numbers as the configuration spells them, and no empty direction.
            ('0,0,loss, 0.1', "loss ' 0.1' is not a probability 0..1"),
            ('0,0,loss,0x1p-3', "loss '0x1p-3' is not a probability 0..1"),
            ('0,0,rate_factor,+0.5', "rate_factor '+0.5' is not 0.001..1"),
            ('0,0,loss,0.1,', "direction '' is not both, a_to_b or b_to_a"),
        ]:
            reply = t.query('/softmrc/fabric/set,' + params)
            check(reply == {'error': error}, f'{params}: {reply}, want {error!r}')
        stats = t.query('/softmrc/stats')
        check(stats['b']['txgen_verified'] > 0, f'no traffic: {stats}')
        d.proc.send_signal(signal.SIGTERM)
        check(d.wait() == 0, 'exit status after SIGTERM', d.output())
    finally:
        d.kill()
    out = d.output()
    s = summary_counts(out)
    check(s['errors'] == 0 and s['mismatches'] == 0, f'errors: {s}', out)
    for line in ['link 0 plane 0 loss 0.2', 'link 0 plane 0 corrupt 0.2 (a_to_b)',
                 'link 0 plane 0 corrupt 0', 'link 0 plane 1 corrupt_icrc recompute',
                 'link 0 plane 1 blackhole on (a_to_b)',
                 'link 0 plane 0 ev 49152 blackholed', 'link 0 plane 0 ev 49152 restored',
                 'link 0 plane 1 rate_factor 0.5']:
        check(re.search(r'softmrcd: t=[\d.]+s ' + re.escape(line) + '$', out, re.M),
              f'no log line for {line!r}', out)


def telemetry_socket(prefix):
    run_dir = os.environ.get('RUNTIME_DIRECTORY')
    if not run_dir:
        base = '/var/run' if os.getuid() == 0 else os.environ.get('XDG_RUNTIME_DIR', '/tmp')
        run_dir = os.path.join(base, 'dpdk')
    return os.path.join(run_dir, prefix, 'dpdk_telemetry.v2')


class Telemetry:
    def __init__(self, path, timeout=10, ready='/softmrc/endpoints'):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise Failure('no telemetry socket at ' + path)
                time.sleep(0.1)
        hello = json.loads(self.sock.recv(16384).decode())
        self.max_len = hello['max_output_len']
        # The commands answer with an error until the daemon has set up.
        while True:
            reply = self.query(ready)
            if 'error' not in reply:
                break
            if time.monotonic() > deadline:
                raise Failure(f'softmrcd never became ready: {reply}')
            time.sleep(0.1)

    def query(self, cmd):
        self.sock.send(cmd.encode())
        reply = json.loads(self.sock.recv(self.max_len).decode())
        name = cmd.split(',')[0]
        check(name in reply, f'reply to {cmd} lacks {name}: {reply}')
        return reply[name]


def check_documented_drops(args, command, keys):
    """The drop (and corruption) counters of a report, `keys`, are those its row in
    docs/daemon.md's telemetry table names, no more and no fewer: there each
    of the daemon's as `key`, and each wire::ParseStatus (rx_<status>) in
    docs/wire-format.md's "Parse results"."""
    with open(os.path.join(args.docs, 'daemon.md')) as f:
        row = next(line for line in f if line.startswith(f'| `{command}` |'))
    documented = {k for k in re.findall(r'`(\w+)`', row)
                  if re.match(r'(rx|tx|engine|app|drop)_|corrupt', k)}
    with open(os.path.join(args.docs, 'wire-format.md')) as f:
        table = f.read().split('## Parse results')[1].split('\n## ')[0]
    parse = {'rx_' + k for k in re.findall(r'^\| (\w+) \|', table, re.M)} - {'rx_Status'}
    if command == '/softmrc/drops':
        documented |= parse
        keys = keys - {'total'}
    check(keys == documented, f'{command}: counters not in docs/daemon.md: '
          f'{sorted(keys - documented)}; documented, not reported: {sorted(documented - keys)}')


def mrc_probe(dst_ip, src_ip, dest_qpn=0, udp_port=4791, opcode=0xd2, icrc=True):
    """An Ethernet frame to plane a/0 with an MRC probe request over IPv6
    (docs/wire-format.md), its ICRC computed as lib/wire does; icrc=False
    leaves the stored one wrong."""
    mth = bytes([1, 0, 0, 0]) + (0).to_bytes(4, 'big')
    probe = (1).to_bytes(2, 'big') + bytes(22)
    bth = bytes([opcode, 0, 0xff, 0xff, 0]) + dest_qpn.to_bytes(3, 'big') + bytes(4)
    udp_len = 8 + len(bth) + len(mth) + len(probe) + 4
    udp = (0xc000).to_bytes(2, 'big') + udp_port.to_bytes(2, 'big') + udp_len.to_bytes(2, 'big')
    udp += bytes(2)
    ip = (bytes([0x6c, 0, 0, 0]) + udp_len.to_bytes(2, 'big') + bytes([17, 64]) +
          socket.inet_pton(socket.AF_INET6, src_ip) + socket.inet_pton(socket.AF_INET6, dst_ip))
    packet = ip + udp + bth + mth + probe
    # The variant fields are ones in the ICRC: traffic class and flow
    # label, hop limit, UDP checksum, the BTH's resv8a.
    masked = bytearray(packet)
    masked[0] |= 0x0f
    for i in (1, 2, 3, 7, 46, 47, 52):
        masked[i] = 0xff
    crc = zlib.crc32(b'\xff' * 8 + bytes(masked)) ^ (0 if icrc else 1)
    eth = bytes.fromhex('02000000' '0a00') + bytes.fromhex('02000000' '0b00') + b'\x86\xdd'
    return eth + packet + crc.to_bytes(4, 'big')


def write_pcap(path, frames):
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for frame in frames:
            f.write(struct.pack('<IIII', 0, 0, len(frame), len(frame)) + frame)


def case_rx_drops(args):
    """Crafted frames replayed into a's one plane (net_pcap): each bad one
    dropped and counted under its reason in /softmrc/drops, in the total,
    and in the summary; the good probe answered."""
    me, peer = plane('a', 0)['ip'], plane('b', 0)['ip']
    good = mrc_probe(me, peer)
    tagged = good[:12] + bytes.fromhex('81000007') + good[12:]  # VLAN 7
    corrupt = bytearray(good)
    corrupt[-10] ^= 1  # in the probe header: only the ICRC can tell
    want = {
        'engine_rx_unknown_qpn': [mrc_probe(me, peer, dest_qpn=5)],
        'rx_not_for_us': [mrc_probe('fd00::99', peer)],
        'rx_other_vlan': [tagged],
        'rx_truncated': [good[:30]],
        'rx_not_ip': [good[:12] + b'\x08\x06' + bytes(46)],
        'rx_not_mrc_port': [mrc_probe(me, peer, udp_port=4792)],
        'rx_bad_opcode': [mrc_probe(me, peer, opcode=0x04)],
        'rx_bad_icrc': [bytes(corrupt), mrc_probe(me, peer, icrc=False)],
        'rx_too_long': [good + bytes(2000)],  # longer than path_mtu 1024 allows
    }
    frames = [good] + [f for fs in want.values() for f in fs]
    rx_file = os.path.join(args.workdir, 'rx_drops.pcap')
    tx_file = os.path.join(args.workdir, 'rx_drops_tx.pcap')
    write_pcap(rx_file, frames)
    cfg = {
        'path_mtu': 1024,
        'stats': {'snapshot_ms': 20, 'log_interval_ms': 0},
        'endpoints': [{'name': 'a', 'planes': [
            dict(plane('a', 0), port=f'net_pcap0,rx_pcap={rx_file},tx_pcap={tx_file}')]}],
        'peers': [{'name': 'b', 'planes': [plane('b', 0)]}],
    }
    d = Daemon(args, 'rx_drops', cfg, stdin=subprocess.PIPE).start(['-i'])
    try:
        t = Telemetry(telemetry_socket(d.prefix))

        def taken():
            return t.query('/softmrc/planes,a')['a/0']['rx_packets']

        # Every frame is either taken or dropped by the daemon.
        wait_for(f'the {len(frames)} frames taken or dropped',
                 lambda: taken() + t.query('/softmrc/drops,a')['a']['total'] == len(frames),
                 output=d.output())
        drops = t.query('/softmrc/drops,a')['a']
        wrong = {k: (v, len(want.get(k, []))) for k, v in drops.items()
                 if k != 'total' and v != len(want.get(k, []))}
        check(not wrong, f'/softmrc/drops: (counted, sent) {wrong}')
        check(taken() == 2, f'good frames taken: {taken()}')
        wait_for('the probe answered', lambda: t.query('/softmrc/planes,a')['a/0']['tx_packets'],
                 output=d.output())
        total = drops['total']
        check(d.quit() == 0, 'exit status after quit', d.output())
        d.read_until(rf'^softmrcd: a: sent 1 packets .* received 2, dropped {total},')
    finally:
        d.kill()


def case_telemetry(args):
    cfg = two_endpoints()
    cfg['traffic'][0]['duration_ms'] = 0  # until SIGTERM
    d = Daemon(args, 'telemetry', cfg).start(['--log-interval-ms', '0'])
    try:
        t = Telemetry(telemetry_socket(d.prefix))
        eps = t.query('/softmrc/endpoints')
        check(set(eps) == {'a', 'b'} and eps['a']['planes'] == 2 and eps['a']['link'] == '0',
              f'/softmrc/endpoints: {eps}')
        ports = t.query('/softmrc/ports')
        # net_ring checks no IPv4 header checksums and keeps no FCS: softmrcd
        # checks the whole frame.
        check(ports['a/0']['driver'] == 'net_ring' and ports['b/1']['link_up'] == 1 and
              ports['a/0']['rx_ipv4_checksum'] == 0 and ports['a/0']['rx_keep_crc'] == 0 and
              ports['a/0']['link_interrupt'] == 0 and
              ports['a/0']['link_interrupts'] == 0 and ports['b/1']['unmap_guard_timeouts'] == 0,
              f'/softmrc/ports: {ports}')
        # The flow starts once a's probe is answered, which on a loaded
        # machine can take a while; then its count grows.
        verified = lambda: t.query('/softmrc/stats')['b']['txgen_verified']
        first = wait_for('a first verified message', verified, timeout=15, output=d.output())
        wait_for(f'txgen_verified to grow past {first}', lambda: verified() > first, timeout=10,
                 output=d.output())
        second = t.query('/softmrc/stats')
        check(second['a']['txgen_errors'] == 0 and second['b']['txgen_mismatches'] == 0 and
              second['a']['txgen_completed_bytes'] == second['a']['txgen_completed'] * 16384,
              f'/softmrc/stats: {second}')
        qp = t.query('/softmrc/qp,a,1')['a/1']
        check(qp['state'] == 'RTS' and qp['peer'] == 'b' and qp['tx_data_packets'] > 0 and
              qp['acks_rx'] > 0 and qp['evs'] == 8, f'/softmrc/qp,a,1: {qp}')
        rqp = t.query('/softmrc/qp,b,1')['b/1']
        check(rqp['rx_data_packets'] > 0 and rqp['acks_tx'] > 0, f'/softmrc/qp,b,1: {rqp}')
        evs = t.query('/softmrc/evs,a,1,6')
        check(sorted(evs) == ['ev6', 'ev7'] and evs['ev7']['plane'] == 1 and
              evs['ev6']['state'] == 'GOOD', f'/softmrc/evs,a,1,6: {evs}')
        planes = t.query('/softmrc/planes,b')
        check(sorted(planes) == ['b/0', 'b/1'] and planes['b/0']['in_use'] == 1 and
              planes['b/0']['rx_packets'] > 0 and planes['b/1']['evs_usable'] == 8 and
              planes['b/0']['rx_ipv4_checksum_by_port'] == 0 and
              planes['b/0']['rx_icrc_from_fcs'] == 0 and planes['b/0']['rx_fcs_wrong'] == 0,
              f'/softmrc/planes,b: {planes}')
        drops = t.query('/softmrc/drops')
        check(drops['a']['total'] == 0 and 'rx_bad_icrc' in drops['a'] and
              'engine_rx_unknown_qpn' in drops['b'], f'/softmrc/drops: {drops}')
        check_documented_drops(args, '/softmrc/drops', set(drops['a']))
        links = t.query('/softmrc/links')
        check(links['link0/0']['up'] == 1 and links['link0/1']['a_to_b_packets'] > 0,
              f'/softmrc/links: {links}')
        check_documented_drops(args, '/softmrc/links', {
            k[len('a_to_b_'):] for k in links['link0/0']
            if k.startswith('a_to_b_drop_') or k.startswith('a_to_b_corrupt')})
        qps = t.query('/softmrc/qps')
        check(sorted(qps) == ['a/1', 'a/2', 'b/1', 'b/2'], f'/softmrc/qps: {qps}')
        # A word where the endpoint goes is a name that is wrong; a number, a
        # QPN without its endpoint.
        bad = t.query('/softmrc/qp,zz,1')
        check(bad == {'error': "no endpoint named 'zz'"}, f'bad qp: {bad}')
        bad = t.query('/softmrc/evs,zz,1,2')
        check(bad == {'error': "no endpoint named 'zz'"}, f'bad evs: {bad}')
        bad = t.query('/softmrc/qp,1')
        check(bad == {'error': 'name the endpoint first: <endpoint>,<qpn>'}, f'qp,1: {bad}')
        # /softmrc/endpoints pages ([,first]) but takes no endpoint.
        bad = t.query('/softmrc/endpoints,zz')
        check(bad == {'error': 'endpoints takes no endpoint: expected [,<first>]'},
              f'endpoints,zz: {bad}')
        eps = t.query('/softmrc/endpoints,,1')
        check(list(eps) == ['b'], f'/softmrc/endpoints,,1: {eps}')
        bad = t.query('/softmrc/ports,zz')
        check(bad == {'error': "no endpoint named 'zz'"}, f'bad ports: {bad}')
        # Parameters of any bytes: every reply is JSON and its text printable
        # ASCII (DPDK's JSON writer mangles bytes >= 0x80 into invalid JSON).
        bad = t.query('/softmrc/ports,\u00e9\x01z')
        check(bad == {'error': "no endpoint named '???z'"}, f'non-ASCII endpoint: {bad}')
        seed = int(os.environ.get('SMRC_TELEMETRY_SEED', '1'))
        rng = random.Random(seed)
        atoms = ['a', 'b', '0', '1', '7', '-1', '4294967296', '0x10', '', ' ', 'down', 'loss',
                 '\u00e9', '\x7f', '\t', '"', '\\', 'a' * 300]
        commands = ['/softmrc/endpoints', '/softmrc/ports', '/softmrc/planes', '/softmrc/qps',
                    '/softmrc/qp', '/softmrc/evs', '/softmrc/drops', '/softmrc/stats',
                    '/softmrc/links']
        for _ in range(500):
            params = ','.join(rng.choice(atoms) for _ in range(rng.randint(0, 5)))
            if rng.random() < 0.2:
                params = ''.join(chr(rng.randint(1, 0x24ff)) for _ in range(rng.randint(1, 60)))
            cmd = rng.choice(commands) + (',' + params if params else '')
            try:
                reply = t.query(cmd[:900])
            except ValueError as e:
                raise Failure(f'seed {seed} (SMRC_TELEMETRY_SEED): {cmd!r}: not JSON: {e}') from None
            text = json.dumps(reply, ensure_ascii=False)
            check(all(' ' <= ch <= '~' for ch in text),
                  f'seed {seed} (SMRC_TELEMETRY_SEED): {cmd!r} -> {text!r}')
        # --help names every /softmrc/ command the daemon registered.
        usage = subprocess.run([args.softmrcd, '--help'], capture_output=True, text=True,
                               timeout=15, check=False).stdout
        registered = [c for c in t.query('/') if c.startswith('/softmrc/')]
        check(len(registered) >= 10, f'/softmrc/ commands registered: {registered}')
        missing = [c for c in registered if not re.search(re.escape(c) + r'\b(?!/)', usage)]
        check(not missing, f'--help does not name {missing}', usage)
        # Debian's client reads the same commands.
        r = subprocess.run(['dpdk-telemetry.py', '-f', d.prefix], input='/softmrc/stats\n',
                           capture_output=True, text=True, timeout=20, check=False)
        replies = [json.loads(l) for l in r.stdout.splitlines() if l.startswith('{"/softmrc')]
        check(len(replies) == 1 and replies[0]['/softmrc/stats']['a']['txgen_posted'] > 0,
              'dpdk-telemetry.py did not show /softmrc/stats:\n' + r.stdout + r.stderr)
        d.proc.send_signal(signal.SIGTERM)
        check(d.wait() == 0, 'exit status after SIGTERM', d.output())
    finally:
        d.kill()


def case_telemetry_pages(args):
    """Reports longer than DPDK's 16 KiB telemetry reply come in pages."""
    cfg = two_endpoints(planes=16)
    del cfg['traffic']  # runs until SIGTERM
    cfg['rings'] = {'rx_desc': 32, 'tx_desc': 32, 'link': 64}
    cfg['links'][0]['delay_line_packets'] = 64
    d = Daemon(args, 'telemetry_pages', cfg).start(['--log-interval-ms', '0'])
    try:
        t = Telemetry(telemetry_socket(d.prefix))
        planes = [f'{e}/{p}' for e in 'ab' for p in range(16)]
        for cmd, want in (('/softmrc/links', [f'link0/{p}' for p in range(16)]),
                          ('/softmrc/planes', planes), ('/softmrc/ports', planes),
                          ('/softmrc/planes,b', planes[16:])):
            rows, pages, first = [], 0, 0
            while True:
                sep = ',' if ',' in cmd else ',,'
                page = t.query(f'{cmd}{sep}{first}')
                pages += 1
                check('error' not in page and pages < 40, f'{cmd}, first {first}: {page}')
                more = page.pop('more', None)
                rows += list(page)
                if more is None:
                    break
                check(more['next_first'] > first, f'{cmd}: {more} after first {first}')
                first = more['next_first']
            check(rows == want, f'{cmd}: rows {rows}, want {want}')
            # Without pages, DPDK cut the reply short and said nothing.
            check(pages > 1 or len(want) == 16 and cmd.endswith(',b'), f'{cmd}: {pages} page(s)')
        bad = t.query('/softmrc/planes,a,x')
        check(bad == {'error': 'expected [<endpoint>][,<first>]'}, f'bad first: {bad}')
        bad = t.query('/softmrc/planes,a,1,2')
        check(bad == {'error': 'expected [<endpoint>][,<first>]'}, f'three parameters: {bad}')
        past = t.query('/softmrc/planes,a,99')
        check(past == {}, f'first past the end: {past}')
        d.proc.send_signal(signal.SIGTERM)
        check(d.wait() == 0, 'exit status after SIGTERM', d.output())
    finally:
        d.kill()


def case_sigterm(args, drain_ms=2000, sig=signal.SIGTERM, name=None, snapshot_ms=None, op='wimm'):
    cfg = two_endpoints(shutdown={'drain_ms': drain_ms})
    cfg['traffic'][0].update(duration_ms=0, op=op)
    name = name or {signal.SIGINT: 'sigint'}.get(sig, 'sigterm' if drain_ms else 'sigterm_flush')
    if snapshot_ms is None:
        d = Daemon(args, name, cfg).start()
        # Mid-transfer: messages are being verified.
        ready = lambda: d.read_until(r'txgen verified \d+ \(\+[1-9]\d*\)')
    else:
        # Snapshots so rare that the last one before the signal is setup's,
        # taken before any message: the log cannot show the transfer, so
        # the signal comes a moment after setup.
        cfg['stats']['snapshot_ms'] = snapshot_ms
        d = Daemon(args, name, cfg).start()
        ready = lambda: (d.read_until(r'softmrcd: control socket'), time.sleep(0.5))
    code, out = d.signal_when(ready, sig)
    check(code == 0, f'exit status {code}', out)
    check(f'stopping ({sig.name})' in out, 'no stopping line', out)
    m = re.search(rf'stopped \({sig.name}\) at t=[\d.]+s: (\d+) messages were in flight, (\d+) '
                  r'completed during the drain, (\d+) flushed \(status FLUSHED\)', out)
    check(m is not None, 'no shutdown line', out)
    in_flight, drained, flushed = map(int, m.groups())
    s = summary_counts(out)
    check(s['errors'] == 0 and s['mismatches'] == 0, f'errors: {s}', out)
    # Nothing is posted to a flushed QP (a flow's end or batch marker).
    check(not re.search(r'^softmrcd: txgen: QP \d+: ', out, re.M), 'a txgen error', out)
    check(s['posted'] == s['completed'] + s['flushed'], f'messages unaccounted for: {s}', out)
    # A flushed message may already have been placed at the responder (its
    # ACK was still on the way), so verified may pass completed. A write
    # batch is checked when its marker arrives: the Writes of the batches
    # whose markers were flushed (two at most per QP) completed unchecked.
    flow = cfg['traffic'][0]
    unchecked = 0 if op == 'wimm' else flow['qps'] * 2 * flow['window']
    check(s['completed'] - unchecked <= s['verified'] <= s['completed'] + s['flushed'],
          f'completed but not verified, or verified twice: {s}', out)
    check(in_flight > 0, 'nothing was in flight at SIGTERM', out)
    if drain_ms:
        check(flushed == 0 and drained == in_flight, 'in-flight work did not complete', out)
    else:
        check(flushed == in_flight == s['flushed'], 'in-flight work was not flushed', out)


def case_sigterm_flush(args):
    # Write: batch markers are flushed too, and are no messages.
    case_sigterm(args, drain_ms=0, op='write')


def case_sigterm_stale_snapshot(args):
    """SIGTERM while the last snapshot is older than the transfer: the drain
    waits for one taken after the lcores saw the stop, so in-flight work
    still completes."""
    case_sigterm(args, name='sigterm_stale_snapshot', snapshot_ms=60000)


def case_sigint(args):
    """SIGINT (Ctrl-C) mid-transfer stops it as SIGTERM does."""
    case_sigterm(args, sig=signal.SIGINT)


def case_setup_signal(args):
    """SIGTERM while setup waits (here on control_state_file, a FIFO no one
    writes, after the ports started): setup gives up, what it set up is torn
    down, and the run counts as one whose traffic never ran (exit 1). Then
    the same while the configuration file itself is opened."""
    fifo = os.path.join(args.workdir, 'state.fifo')
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    d = Daemon(args, 'setup_signal', two_endpoints(control_state_file=fifo)).start()
    code, out = d.signal_when(lambda: wait_for('setup to open the FIFO', d.blocked_on_fifo,
                                               timeout=30, output=d.output()))
    check(code == 1, f'exit status {code}, want 1', out)
    check('softmrcd: stopped (SIGTERM) during setup, before any traffic' in out,
          'no line saying setup stopped', out)
    check('softmrcd: FAIL: the traffic never ran, nothing was verified' in out, 'no FAIL line', out)
    check('control_state_file' not in out and 'txgen' not in out,
          'an error for the interrupted step, or a run', out)

    # The configuration itself a FIFO no one writes: the signal interrupts
    # its open, which is a stop, not a file that cannot be opened.
    d = Daemon(args, 'setup_signal')
    d.cmd[d.cmd.index(d.cfg_path)] = fifo
    d.start()
    code, out = d.signal_when(lambda: wait_for('the configuration FIFO opened', d.blocked_on_fifo,
                                               timeout=30, output=d.output()))
    check(code == 1, f'exit status {code}, want 1 (config read)', out)
    check(f'softmrcd: stopped (SIGTERM) while reading {fifo}, before any setup' in out,
          'no line saying the configuration read stopped', out)
    check('cannot open' not in out and 'Interrupted' not in out, 'an error for the open', out)


class VhostWire:
    """dpdk-testpmd io-forwarding between two net_virtio_user ports, the
    vhost-user frontends of two net_vhost ports: a wire whose coming and
    going the vhost ports see as their link going up and down, with a real
    link-status interrupt."""

    def __init__(self, args, name, sock_a, sock_b):
        self.cmd = [shutil.which('dpdk-testpmd') or 'dpdk-testpmd',
                    '--lcores', '0@1,1@1', '--no-huge', '-m', '256', '--no-pci',
                    '--file-prefix', 'smrcd-wire-' + name, '--log-level', 'lib.eal:warning',
                    '--vdev', f'net_virtio_user0,path={sock_a},queues=1',
                    '--vdev', f'net_virtio_user1,path={sock_b},queues=1', '--',
                    '--total-num-mbufs=2048', '--forward-mode=io', '--auto-start',
                    '--no-lsc-interrupt']
        self.log = os.path.join(args.workdir, f'wire-{name}.log')
        self.proc = None

    def start(self):
        # Its standard input held open: testpmd without -i runs until EOF.
        with open(self.log, 'a') as log:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT)
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def case_vhost_lsc(args):
    """Ports whose PMD raises link-status interrupts (net_vhost: its link is
    up while a vhost-user frontend is connected): a and b each have two
    planes on net_vhost ports, wired plane by plane by VhostWire. Plane 1's
    wire is SIGKILLed mid-transfer: the interrupts take plane 1 down on both
    endpoints and the transfer goes on over plane 0; a new wire brings it
    back. Every byte verified, and link_interrupts counts each change."""
    sock = {(e, p): os.path.join(args.workdir, f'{e}{p}.sock') for e in 'ab' for p in range(2)}
    for path in sock.values():
        if os.path.exists(path):
            os.unlink(path)
    cfg = two_endpoints()
    del cfg['links']
    for i, e in enumerate('ab'):
        for p, pl in enumerate(cfg['endpoints'][i]['planes']):
            pl['port'] = f'net_vhost{2 * i + p},iface={sock[e, p]},queues=1'
    cfg['traffic'][0].update(op='write', size=65536, window=8, duration_ms=0)
    d = Daemon(args, 'vhost_lsc', cfg).start(['--log-interval-ms', '200'])
    wires = [VhostWire(args, str(p), sock['a', p], sock['b', p]) for p in range(2)]

    def planes_change(planes, what, count):
        """Reads `count` lines '<endpoint> plane <p> <what>', in any order:
        each of a and b for each plane in `planes`."""
        seen = {d.read_until(rf'([ab]) plane ([{planes}]) {what}', timeout=20).groups()
                for _ in range(count)}
        want = {(e, p) for e in 'ab' for p in planes}
        check(seen == want, f'{what}: saw {sorted(seen)}, want {sorted(want)}', d.output())

    try:
        planes_change('01', r'down \(link down at start\)', 4)
        for w in wires:
            w.start()
        planes_change('01', r'up \(link up\)', 4)
        d.read_until(r'txgen verified \d+ \(\+[1-9]\d*\)', timeout=20)
        wires[1].kill()
        planes_change('1', r'down \(link down\)', 2)
        # Plane 0 alone carries the transfer.
        m = d.read_until(r'planes 10 .*txgen verified \d+ \(\+[1-9]\d*\)', timeout=20)
        wires[1] = VhostWire(args, '1', sock['a', 1], sock['b', 1]).start()
        planes_change('1', r'up \(link up\)', 2)
        d.read_until(r'planes 11 .*txgen verified \d+ \(\+[1-9]\d*\)', timeout=20)
        ports = Telemetry(telemetry_socket(d.prefix)).query('/softmrc/ports')
        for e in 'ab':
            for p, least in ((0, 1), (1, 3)):  # plane 1: up, down, up
                r = ports[f'{e}/{p}']
                check(r['driver'] == 'net_vhost' and r['link_interrupt'] == 1 and
                      r['link_up'] == 1 and r['link_interrupts'] >= least,
                      f'{e}/{p}: want link_interrupts >= {least}: {r}', d.output())
        code, out = d.signal_when(lambda: None)
    finally:
        d.kill()
        for w in wires:
            w.kill()
    check(code == 0 and 'PASS' in out, f'exit status {code}', out)
    s = summary_counts(out)
    check(s['verified'] > 0 and s['errors'] == 0 and s['mismatches'] == 0, f'summary {s}', out)
    print(f"{s['verified']} messages verified; plane 1 went down and up by its ports' "
          f'interrupts: {m.group(0)}')


def memif_client_config(sock):
    """Endpoint a, a net_memif client of `sock` (a server that never comes),
    with a flow to its peer b."""
    return {
        'path_mtu': 1024,
        'stats': {'snapshot_ms': 20, 'log_interval_ms': 100},
        'endpoints': [{'name': 'a', 'planes': [dict(
            plane('a', 0), port=f'net_memif0,role=client,id=0,socket={sock},socket-abstract=no')]}],
        'peers': [{'name': 'b', 'planes': [plane('b', 0)]}],
        'traffic': [{'from': 'a', 'to': 'b', 'qps': 1, 'op': 'write', 'size': 4096,
                     'window': 2, 'duration_ms': 500}],
    }


def case_nothing_verified(args):
    """A run whose traffic never flowed (a's memif server, and so its peer,
    never comes) is no clean run: SIGTERM, FAIL, exit 1. Under -i, a run
    whose traffic was never started is clean."""
    cfg = memif_client_config(os.path.join(args.workdir, 'nobody.sock'))
    d = Daemon(args, 'nothing_verified', cfg).start()
    code, out = d.signal_when(
        lambda: d.read_until(r'^softmrcd: t=[\d.]+s a\[.*planes 0 .*txgen verified 0 '))
    check(code == 1, f'exit status {code}, want 1', out)
    check('softmrcd: FAIL: 0.00 GiB verified, every byte checked, 0 errors; no message completed '
          'or arrived, so no byte was checked' in out, 'no FAIL line', out)
    s = summary_counts(out)
    check(s['completed'] == s['verified'] == 0, f'something moved: {s}', out)

    d = Daemon(args, 'nothing_started', cfg, stdin=subprocess.PIPE).start(['-i'])
    try:
        code = d.quit()
    finally:
        d.kill()
    out = d.output()
    check(code == 0 and 'softmrcd: PASS: 0.00 GiB verified' in out,
          f'-i without start: exit status {code}', out)


# What the prompt's 'help' lists, one form per command line (continuation
# lines indented); case_interactive runs each form.
PROMPT_COMMANDS = [
    'show endpoints', 'show ports|planes|qps|drops|stats|links [<endpoint>]',
    'show qps <endpoint>|* <first>', 'show qp <endpoint> <qpn>',
    'show evs <endpoint> <qpn> [<first>]', 'start | stop', 'set plane <endpoint> <plane> up|down',
    'set link <link> plane <plane> up|down',
    'set link <link> plane <plane> loss <p> | blackhole on|off | blackhole_ev <ev> |',
    'clear stats', 'quit',
]


def case_interactive(args):
    cfg = two_endpoints()
    cfg['traffic'][0]['duration_ms'] = 0
    # 31 more QPs each side: 33 on a, so that its QPs take two pages.
    cfg['traffic'].append({'from': 'a', 'to': 'b', 'qps': 31, 'op': 'wimm', 'size': 1024,
                           'window': 2})
    d = Daemon(args, 'interactive', cfg, stdin=subprocess.PIPE).start(['-i',
                                                                      '--log-interval-ms', '0'])

    def send(line, expect, pause=0.0):
        d.proc.stdin.write((line + '\n').encode())
        d.proc.stdin.flush()
        m = d.read_until(expect)
        time.sleep(pause)
        return m

    def send_and_log(line, reply, logged):
        """A command whose effect another thread logs: the prompt's reply
        and that line come in either order."""
        start = d.consumed
        send(line, reply)
        after_reply = d.consumed
        d.consumed = start
        d.read_until(logged)
        d.consumed = max(d.consumed, after_reply)

    def field(text_row, key):
        m = re.search(rf'\b{key}=(\S+)', text_row)
        check(m is not None, f'no {key} in {text_row!r}', d.output())
        return m.group(1)

    def show(what, row, pattern):
        """The fields of one row of `show <what>` (lines up to the next row)."""
        send('show ' + what, '^' + re.escape(row) + '$')
        text = d.read_until(pattern).string
        return text

    def block(line):
        """What `line` printed: its lines between the answers to a command
        that does not exist, sent before and after it (so that nothing
        printed before counts); without the commands echoed after their
        prompts ('softmrcd> help') and log lines ('softmrcd: ...')."""
        send('no-such-command', 'Command not found')
        start = d.consumed
        send(line + '\nno-such-command', 'Command not found')
        return [l for l in d.lines[start:d.consumed - 1]
                if l.strip() and not l.startswith('softmrcd')]

    def rows(what):
        """`show <what>`, as {row: {key: value}}."""
        out, row = {}, None
        for l in block('show ' + what):
            if l.startswith(' '):
                check(row is not None, f'show {what}: fields before a row', d.output())
                out[row].update(re.findall(r'(\S+)=(\S+)', l))
            else:
                row = l.strip()
                out[row] = {}
        return out

    try:
        listed = [l.split('  ')[0] for l in block('help') if not l.startswith(' ')]
        check(listed == PROMPT_COMMANDS, f'help lists {listed}', d.output())
        eps = rows('endpoints')
        check(sorted(eps) == ['a', 'b'] and eps['a']['qps'] == '33' and eps['a']['link'] == '0',
              f'show endpoints: {eps}', d.output())
        stats = rows('stats')  # nothing before 'start'
        check(stats['a']['txgen_posted'] == '0' and stats['b']['txgen_verified'] == '0',
              f'show stats before start: {stats}', d.output())
        send('start', 'traffic started', pause=0.6)
        verified = int(field(show('stats', 'b', r'txgen_verified='), 'txgen_verified'))
        check(verified > 0, 'no traffic after start', d.output())
        stats = rows('stats a')
        check(list(stats) == ['a'] and int(stats['a']['txgen_posted']) > 0,
              f'show stats a: {stats}', d.output())
        ports = rows('ports')
        check(sorted(ports) == ['a/0', 'a/1', 'b/0', 'b/1'] and
              all(r['driver'] == 'net_ring' and r['link_up'] == '1' and int(r['tx_packets']) > 0
                  for r in ports.values()), f'show ports: {ports}', d.output())
        check(sorted(rows('ports b')) == ['b/0', 'b/1'], 'show ports b', d.output())
        drops = rows('drops')
        check(sorted(drops) == ['a', 'b'] and drops['b']['total'] == '0' and
              'rx_bad_icrc' in drops['b'] and 'engine_rx_unknown_qpn' in drops['a'],
              f'show drops: {drops}', d.output())
        check(list(rows('drops a')) == ['a'], 'show drops a', d.output())
        qps = rows('qps')
        check(len(qps) == 33 and qps['more'] == {'next_first': '32'} and 'a/1' in qps,
              f'show qps: {list(qps)}', d.output())
        qps = rows('qps a')
        check(sorted(qps) == sorted([f'a/{n}' for n in range(1, 33)] + ['more']) and
              qps['more'] == {'next_first': '32'}, f'show qps a: {list(qps)}', d.output())
        qps = rows('qps a 32')
        check(list(qps) == ['a/33'] and qps['a/33']['owner'] == 'txgen' and
              qps['a/33']['peer'] == 'b', f'show qps a 32: {qps}', d.output())
        qps = rows('qps * 32')  # every endpoint's list, paged on: a's 33rd, b's 32 more
        check(list(qps)[:2] == ['a/33', 'b/1'] and len(qps) == 33 and
              qps['more'] == {'next_first': '64'}, f'show qps * 32: {list(qps)}', d.output())
        check(list(rows('qps * 64')) == ['b/32', 'b/33'], 'show qps * 64', d.output())
        links = rows('links a')
        check(sorted(links) == ['link0/0', 'link0/1'] and links['link0/0']['up'] == '1',
              f'show links a: {list(links)}', d.output())
        send('set plane a 1 down', 'a plane 1 set down', pause=0.3)
        row = show('planes a', 'a/1', r'\bin_use=')
        check(field(row, 'admin_up') == '0' and field(row, 'in_use') == '0', row, d.output())
        # a's port status took the plane away from b's QPs too.
        row = show('qp b 1', 'b/1', r'usable_evs=')
        check(field(row, 'usable_evs') == '4', f'b still uses plane 1: {row}', d.output())
        send('set plane a 1 up', 'a plane 1 set up', pause=0.3)
        row = show('qp b 1', 'b/1', r'usable_evs=')
        check(field(row, 'usable_evs') == '8', f'b did not get plane 1 back: {row}', d.output())
        send_and_log('set link 0 plane 0 down', 'link 0 plane 0 set down',
                     r'b plane 0 down \(link down\)')
        send_and_log('set link 0 plane 0 up', 'link 0 plane 0 set up', r'b plane 0 up \(link up\)')
        # The link's lcore applies it (and says so) at once, and shows it in
        # its next snapshot.
        send('set link 0 plane 1 loss 0.25', 'link 0 plane 1 set loss 0.25', pause=0.3)
        row = show('links', 'link0/1', r'\ba_to_b_loss=')
        check(field(row, 'a_to_b_loss') == '0.25', row, d.output())
        row = d.read_until(r'\bb_to_a_loss=').string
        check(field(row, 'b_to_a_loss') == '0.25', row, d.output())
        send('set link 0 plane 1 loss 0', 'link 0 plane 1 set loss 0')
        send('set link 0 plane 1 corrupt_icrc recompute',
             'link 0 plane 1 set corrupt_icrc recompute', pause=0.3)
        row = show('links', 'link0/1', r'\ba_to_b_corrupt_icrc=')
        check(field(row, 'a_to_b_corrupt_icrc') == 'recompute', row, d.output())
        send('set link 0 plane 1 corrupt_icrc keep', 'link 0 plane 1 set corrupt_icrc keep')
        send('set link 0 plane 1 corrupt 2', "error: corrupt '2' is not a probability 0..1")
        send('set link 0 plane 1 rate_factor 2', "error: rate_factor '2' is not 0.001..1")
        def link_row(plane, cond):
            """Row link0/<plane> of `show links` once cond(row) holds."""
            return wait_for(f'show links: link0/{plane}',
                            lambda: (lambda r: r if cond(r) else None)(rows('links')[
                                f'link0/{plane}']), output=d.output())

        # Briefly: a plane blackholed both ways for long takes QPs to their
        # retry limit.
        send('set link 0 plane 1 blackhole on', 'link 0 plane 1 set blackhole on')
        link_row(1, lambda r: r['a_to_b_blackhole'] == r['b_to_a_blackhole'] == '1' and
                 int(r['a_to_b_drop_blackhole']) > 0)
        send('set link 0 plane 1 blackhole off', 'link 0 plane 1 set blackhole off')
        # EV 0 of plane 0 rides in UDP source port 49152 (ev_profiles.default).
        send('set link 0 plane 0 blackhole_ev 49152', 'link 0 plane 0 set ev 49152 blackholed')
        link_row(0, lambda r: r['a_to_b_blackholed_evs'] == r['b_to_a_blackholed_evs'] == '1' and
                 int(r['a_to_b_drop_ev_blackhole']) > 0)
        send('set link 0 plane 0 restore_ev 49152', 'link 0 plane 0 set ev 49152 restored')
        send('set link 0 plane 1 rate_factor 0.5', 'link 0 plane 1 set rate_factor 0.5',
             pause=0.3)
        links = rows('links')
        check(links['link0/0']['a_to_b_blackholed_evs'] == '0' and
              links['link0/1']['a_to_b_blackhole'] == '0' and
              links['link0/1']['a_to_b_rate_factor'] == '0.5', f'show links: {links}', d.output())
        send('show evs a 1 7', r'^ev7$')
        evs = rows('evs a 1')
        check(sorted(evs) == [f'ev{i}' for i in range(8)] and evs['ev7']['plane'] == '1',
              f'show evs a 1: {evs}', d.output())
        send('stop', 'traffic stopped', pause=0.5)
        send('clear stats', 'stats cleared', pause=0.2)
        row = show('planes', 'a/0', r'\brx_packets=')
        check(field(row, 'rx_packets') == '0', f'not cleared: {row}', d.output())
        send('frobnicate', r'Command not found')
        code = d.quit()
    finally:
        d.kill()
    out = d.output()
    check(code == 0, f'exit status {code}', out)
    check('stopping (quit)' in out and 'softmrcd: PASS' in out, 'no clean quit', out)
    check(re.search(r'softmrcd: t=[\d.]+s link 0 plane 1 loss 0.25$', out, re.M),
          'the link did not apply the loss', out)



def case_interactive_errors(args):
    """The prompt's refusals: start and stop with no traffic configured, and
    commands that did not reach every endpoint's lcore (its command ring
    full) said to have failed there rather than to have worked."""
    cfg = two_endpoints()
    del cfg['traffic']
    # The lcore shares the control thread's CPU: a burst of commands typed at
    # once fills its command ring (64) before it runs to drain it. Each
    # endpoint has a ring: a refusal names the one, or both, that were full.
    eal = ['--lcores', '0@0,1@0'] + EAL[2:]
    d = Daemon(args, 'interactive_errors', cfg, stdin=subprocess.PIPE, eal=eal).start(
        ['-i', '--log-interval-ms', '0'])

    def send(text):
        d.proc.stdin.write((text + '\n').encode())
        d.proc.stdin.flush()

    try:
        for word in ('start', 'stop'):
            send(word)
            d.read_until(f'^error: no traffic to {word}: the configuration has no flow from or '
                         'to an endpoint hosted here$')
        burst = 400
        send('\n'.join(['clear stats'] * burst) + '\nno-such-command')
        d.read_until('Command not found')
        replies = [l for l in d.lines if l.startswith(('stats cleared', 'error: plane'))]
        missed = [l for l in replies if l != 'stats cleared']
        check(len(replies) == burst and missed and all(
            re.fullmatch(r"error: plane and drop counters not cleared on ('a'|'b'|'a', 'b'): "
                         r"command ring full \(its lcore is behind\); try again", l)
            for l in missed),
              f'{len(replies)} replies, {len(missed)} refusals: {set(missed)}', d.output())
        check('traffic started' not in d.output(), 'start said it started', d.output())
        # A plane set down twice: the second is a no-op, but logged.
        send('set link 0 plane 0 down')
        d.read_until(r'softmrcd: t=[\d.]+s link 0 plane 0 down$')
        send('set link 0 plane 0 down')
        d.read_until(r'softmrcd: t=[\d.]+s link 0 plane 0 down \(already down\)$')
        # A wrong endpoint's name is not taken for a missing one.
        send('show qp zz 1')
        d.read_until("^error: no endpoint named 'zz'$")
        code = d.quit()
    finally:
        d.kill()
    check(code == 0, f'exit status {code}', d.output())



def case_interactive_stopping(args):
    """'start' while a stop drains refused: the flows are ended for good."""
    cfg = two_endpoints(shutdown={'drain_ms': 5000})
    cfg['traffic'][0]['duration_ms'] = 0
    d = Daemon(args, 'interactive_stopping', cfg, stdin=subprocess.PIPE).start(
        ['-i', '--log-interval-ms', '0'])

    def send(text):
        d.proc.stdin.write((text + '\n').encode())
        d.proc.stdin.flush()

    try:
        send('start')
        d.read_until('^traffic started$')
        # Nothing in flight completes: the drain lasts its 5 s.
        for p in (0, 1):
            send(f'set link 0 plane {p} blackhole on')
            d.read_until(f'link 0 plane {p} set blackhole on')
        d.proc.send_signal(signal.SIGINT)
        d.read_until(r'stopping \(SIGINT\)')
        send('start')
        d.read_until('^error: softmrcd is stopping: no new traffic$')
    finally:
        d.kill()
BAD_CONFIGS = [
    ('unknown_key', lambda c: c.update(mtu=1500), 'mtu: unknown key', '<key>: unknown key'),
    ('bad_mtu', lambda c: c.update(path_mtu=1500),
     'path_mtu: 1500 is not 256, 512, 1024, 2048, 4096 or 9000',
     '<n> is not 256, 512, 1024, 2048, 4096 or 9000'),
    ('not_a_number', lambda c: c.update(rings={'rx_desc': 'many'}),
     "rings.rx_desc: 'many' is not a whole number", "'<value>' is not a whole number"),
    ('out_of_range', lambda c: c.update(rings={'tx_desc': 8}),
     'rings.tx_desc: 8 is out of range 32..16384', '<n> is out of range <lo>..<hi>'),
    ('idle_yield_range', lambda c: c.update(idle_yield_passes=2000000000),
     'idle_yield_passes: 2000000000 is out of range 0..1000000000', '<n> is out of range <lo>..<hi>'),
    ('not_a_bool', lambda c: c.update(rx_keep_crc='sometimes'),
     "rx_keep_crc: 'sometimes' is not true or false", "'<value>' is not true or false"),
    ('idle_yield_word', lambda c: c.update(idle_yield_passes='often'),
     "idle_yield_passes: 'often' is not a whole number", "'<value>' is not a whole number"),
    ('bad_mac', lambda c: c['endpoints'][0]['planes'][1].update(mac='02:00:zz:00:00:01'),
     "endpoints[0].planes[1].mac: '02:00:zz:00:00:01' is not a MAC address "
     "(like 02:00:00:00:00:01)", "'<value>' is not a MAC address (like 02:00:00:00:00:01)"),
    ('bad_ip', lambda c: c['endpoints'][1]['planes'][0].update(ip='fd00::g'),
     "endpoints[1].planes[0].ip: 'fd00::g' is not an IPv4 or IPv6 address",
     "'<value>' is not an IPv4 or IPv6 address"),
    ('stev_ipv4', lambda c: c['endpoints'][0].update(
        ev_mode='stev', planes=[{'mac': '02:00:00:00:0a:00', 'ip': '10.0.0.1'}] * 2),
     'endpoints[0].planes[0].ip: IPv4 address with ev_mode stev (it needs IPv6)',
     'IPv4 address with ev_mode <mode> (it needs IPv6)'),
    ('srv6_ipv4', lambda c: c['endpoints'][0].update(
        ev_mode='srv6', planes=[{'mac': '02:00:00:00:0a:00', 'ip': '10.0.0.1'}] * 2),
     'endpoints[0].planes[0].ip: IPv4 address with ev_mode srv6 (it needs IPv6)',
     'IPv4 address with ev_mode <mode> (it needs IPv6)'),
    ('srv6_not_a_locator', lambda c: c['endpoints'][0].update(ev_mode='srv6'),
     "endpoints[0].planes[0].ip: 'fd00::a' is not a uSID locator (ev_mode srv6): a 32-bit block, "
     "a node uSID other than 0, then zeros, like fcbb:bb00:1::",
     "'<address>' is not a uSID locator (ev_mode srv6): a 32-bit block, a node uSID other than 0, "
     "then zeros, like fcbb:bb00:1::"),
    ('srv6_blocks', lambda c: [e.update(ev_mode='srv6', planes=[
        {'mac': f'02:00:00:00:0{n}:0{p}', 'ip': f'fcbb:bb0{p + (n == 1 and p == 1) * 8}:{n + 1}::'}
        for p in range(2)]) for n, e in enumerate(c['endpoints'])],
     "endpoints[1].planes[1].ip: 'fcbb:bb09:2::' is outside fcbb:bb01::/32, the uSID block of 'a' "
     "on this plane (the SRv6 endpoints of a plane share one)",
     "'<address>' is outside <block>/32, the uSID block of '<name>' on this plane (the SRv6 "
     "endpoints of a plane share one)"),
    ('srv6_path_zero', lambda c: [c['endpoints'][0].update(ev_mode='srv6', planes=[
        {'mac': f'02:00:00:00:0a:0{p}', 'ip': f'fcbb:bb0{p}:a::'} for p in range(2)]),
        c.pop('traffic'), c.pop('links'), c['ev_profiles']['default'].update(udp_port_base=0)],
     'ev_profiles.default.udp_port_base: is 0, which ends a uSID list: SRv6 paths need 1..65535',
     'is 0, which ends a uSID list: SRv6 paths need 1..65535'),
    ('link_ev_modes', lambda c: c['endpoints'][1].update(ev_mode='stev'),
     "links[0].endpoints: 'b' has ev_mode stev, but 'a' has udp",
     "'<name>' has ev_mode <mode>, but '<name>' has <mode>"),
    ('vlan_range', lambda c: c['endpoints'][0]['planes'][0].update(vlan=4095),
     'endpoints[0].planes[0].vlan: 4095 is out of range 1..4094', '<n> is out of range <lo>..<hi>'),
    ('vlan_pcp_alone', lambda c: c['endpoints'][0]['planes'][1].update(vlan_pcp=3),
     'endpoints[0].planes[1].vlan_pcp: needs a vlan', 'needs a vlan'),
    ('vlan_link_mismatch', lambda c: c['endpoints'][0]['planes'][1].update(vlan=20),
     "endpoints[1].planes[1].vlan: VLAN 0, but 'a', its link's other end, tags plane 1 with 20 "
     "(0: untagged)", "VLAN <n>, but '<name>', its link's other end, tags plane <p> with <m> "
     "(0: untagged)"),
    ('plane_count', lambda c: c['endpoints'][1]['planes'].pop(),
     'endpoints[1].planes: 1 planes, but endpoints[0] has 2 (plane N is port N on every '
     'endpoint)', '<n> planes, but endpoints[0] has <m> (plane N is port N on every endpoint)'),
    ('duplicate_name', lambda c: c['endpoints'][1].update(name='a'),
     "endpoints[1].name: 'a' is used twice", "'<name>' is used twice"),
    ('missing_port', lambda c: c.pop('links'),
     'endpoints[0].planes[0].port: missing (a PCI address or vdev spec, or join the endpoint '
     'to a link)', 'missing (a PCI address or vdev spec, or join the endpoint to a link)'),
    ('unknown_endpoint', lambda c: c['traffic'][0].update(to='c'),
     "traffic[0].to: no endpoint named 'c'", "no endpoint named '<name>'"),
    ('window_too_big', lambda c: c['traffic'][0].update(window=500),
     'traffic[0].window: 500 is above qp.max_wimm (128)', '<n> is above qp.max_wimm (<m>)'),
    # Defaults are checked against the limits as written values are.
    ('window_default', lambda c: (c['traffic'][0].pop('window'),
                                  c.update(limits={'max_recv_wr': 4})),
     'traffic[0].window: 8 (the default) is above limits.max_recv_wr (4)',
     '<n> is above limits.max_recv_wr (<m>)'),
    ('write_markers', lambda c: (c['traffic'][0].update(op='write', window=1),
                                 c.update(limits={'max_recv_wr': 1})),
     'traffic[0].op: write keeps 2 batch markers (0-byte WIMMs) in flight: it needs qp.max_wimm '
     'and limits.max_recv_wr of at least 2',
     'write keeps 2 batch markers (0-byte WIMMs) in flight: it needs qp.max_wimm and '
     'limits.max_recv_wr of at least 2'),
    ('mpr_default', lambda c: c.update(limits={'max_mpr': 4}),
     'qp.mpr: 8 (the default) is above limits.max_mpr (4)', '<n> is above limits.max_mpr (<m>)'),
    ('mpr_over_limit', lambda c: c.update(limits={'max_mpr': 4}, qp={'mpr': 6}),
     'qp.mpr: 6 is above limits.max_mpr (4)', '<n> is above limits.max_mpr (<m>)'),
    ('max_wimm_default', lambda c: c.update(limits={'max_wimm': 64}),
     'qp.max_wimm: 128 (the default) is above limits.max_wimm (64)',
     '<n> is above limits.max_wimm (<m>)'),
    # Leading zeros are decimal, not octal.
    ('vlan_leading_zero', lambda c: c['endpoints'][0]['planes'][0].update(vlan='04095'),
     'endpoints[0].planes[0].vlan: 4095 is out of range 1..4094', '<n> is out of range <lo>..<hi>'),
    ('hex_fraction', lambda c: c['links'][0].update(rate_gbps='0x10'),
     "links[0].rate_gbps: '0x10' is not a number", "'<value>' is not a number"),
    ('requester_timeout_range', lambda c: c['traffic'][0].update(requester_timeout_ms=-1),
     "traffic[0].requester_timeout_ms: '-1' is not a whole number",
     "'<value>' is not a whole number"),
    ('bad_choice', lambda c: c['traffic'][0].update(op='read'),
     "traffic[0].op: 'read' is not write or wimm", "'<value>' is not <choice> or <choice>"),
    ('unknown_profile', lambda c: c.update(qp={'cc_profile': 'fast'}),
     "qp.cc_profile: no profile named 'fast'", "no profile named '<name>'"),
    ('too_few_mbufs', lambda c: c.update(mempool={'mbufs': 1500}),
     "mempool.mbufs: 1500 is too few for endpoint 'a': 2 planes x 1536 link ring and delay line "
     "slots need at least 4096", "<n> is too few for endpoint '<name>': <p> planes x <s> link "
     "ring and delay line slots need at least <m>"),
    # Slots for 2 QPs x 3 x window 4 of 64 MiB, more than -m 512 leaves.
    ('no_memory', lambda c: c['traffic'][0].update(size=64 << 20, window=4),
     "traffic[0]: cannot allocate 536870912 bytes of registered memory on 'a' (give the EAL "
     "more memory with -m)", "cannot allocate <n> bytes of registered memory on '<name>'"),
    ('fabric_rate', lambda c: c['links'][0].update(rate_gbps=0),
     'links[0].rate_gbps: 0 is out of range 0.001..10000', '<n> is out of range <lo>..<hi>'),
    ('fabric_overflow', lambda c: c['links'][0].update(overflow='cut'),
     "links[0].overflow: 'cut' is not drop or trim", "'<value>' is not <choice> or <choice>"),
    ('fabric_corrupt', lambda c: c['links'][0].update(corrupt=1.5),
     'links[0].corrupt: 1.5 is out of range 0..1', '<n> is out of range <lo>..<hi>'),
    ('fabric_corrupt_icrc',
     lambda c: c['links'][0].update(planes=[{'plane': 1, 'corrupt_icrc': 'fix'}]),
     "links[0].planes[0].corrupt_icrc: 'fix' is not keep or recompute",
     "'<value>' is not <choice> or <choice>"),
    ('fabric_ecn', lambda c: c['links'][0].update(buffer_kib=32, ecn_kib=64),
     'links[0].ecn_kib: 64 is not below buffer_kib (32): no packet would be marked',
     '<n> is not below buffer_kib (<m>): no packet would be marked'),
    ('fabric_plane_twice', lambda c: c['links'][0].update(planes=[{'plane': 1, 'loss': 0.1},
                                                                  {'plane': 1}]),
     'links[0].planes[1].plane: plane 1 is configured twice', 'plane <n> is configured twice'),
    ('fabric_plane_missing', lambda c: c['links'][0].update(planes=[{'delay_us': 5}]),
     'links[0].planes[0].plane: missing', '<key>: missing'),
    ('fabric_loss', lambda c: c['links'][0].update(planes=[{'plane': 0, 'loss': 2}]),
     'links[0].planes[0].loss: 2 is out of range 0..1', '<n> is out of range <lo>..<hi>'),
    ('fabric_unknown_key', lambda c: c['links'][0].update(jitter_us=5),
     'links[0].jitter_us: unknown key', '<key>: unknown key'),
    ('schedule_from', lambda c: c['links'][0].update(schedule_from='now'),
     "links[0].schedule_from: 'now' is not start or first_frame",
     "'<value>' is not <choice> or <choice>"),
    ('schedule_no_change', lambda c: c['links'][0].update(schedule=[{'at_ms': 10, 'plane': 0}]),
     'links[0].schedule[0]: needs one of state, loss, blackhole, rate_factor, corrupt or '
     'corrupt_icrc',
     'needs one of state, loss, blackhole, rate_factor, corrupt or corrupt_icrc'),
    ('schedule_two_changes', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'state': 'down', 'loss': 0.1}]),
     "links[0].schedule[0]: has both 'state' and 'loss'; one change per event",
     "has both '<a>' and '<b>'; one change per event"),
    ('schedule_evs', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'loss': 0.1, 'evs': [49152]}]),
     'links[0].schedule[0].evs: only goes with blackhole', 'only goes with blackhole'),
    ('schedule_no_evs', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'blackhole': True, 'evs': []}]),
     'links[0].schedule[0].evs: names no EV', 'names no EV'),
    ('schedule_bad_ev', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'blackhole': True, 'evs': [49152, 70000]}]),
     'links[0].schedule[0].evs[1]: 70000 is out of range 0..65535',
     '<n> is out of range <lo>..<hi>'),
    ('schedule_direction', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'state': 'down', 'direction': 'a_to_b'}]),
     'links[0].schedule[0].direction: a plane goes down or up in both directions, as a cable '
     'does', 'a plane goes down or up in both directions, as a cable does'),
    ('schedule_rate_factor', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 10, 'plane': 0, 'rate_factor': 0}]),
     'links[0].schedule[0].rate_factor: 0 is out of range 0.001..1',
     '<n> is out of range <lo>..<hi>'),
    ('delay_line', lambda c: c['links'][0].update(delay_line_packets=8),
     'links[0].delay_line_packets: 8 is out of range 16..65536', '<n> is out of range <lo>..<hi>'),
    ('schedule_order', lambda c: c['links'][0].update(schedule=[
        {'at_ms': 50, 'plane': 0, 'state': 'down'}, {'at_ms': 10, 'plane': 0, 'state': 'up'}]),
     'links[0].schedule[1].at_ms: is earlier than the event before it',
     'is earlier than the event before it'),
    ('plane_lcore_alone', lambda c: c['endpoints'][0]['planes'][1].update(lcore=2),
     "endpoints[0].planes[1].lcore: needs the endpoint's own lcore set too (endpoints[0].lcore)",
     "needs the endpoint's own lcore set too"),
    ('no_endpoints', lambda c: c.update(endpoints=[], links=[], traffic=[]),
     'endpoints: missing (at least one endpoint to host)',
     'missing (at least one endpoint to host)'),
    ('key_without_value', lambda c: c.update(path_mtu=None),
     'path_mtu: has no value (leave the key out for its default)',
     'has no value (leave the key out for its default)'),
    ('port_twice', lambda c: (c.pop('links'), [p.update(port=f'net_null{i}') for e in c['endpoints']
                                               for i, p in enumerate(e['planes'])]),
     "endpoints[1].planes[0].port: 'net_null0' is also endpoints[0].planes[0].port",
     "'<device>' is also endpoints[<i>].planes[<p>].port"),
    ('app_socket_twice', lambda c: [e.update(app_socket='/tmp/smrc-twice.sock')
                                    for e in c['endpoints']],
     "endpoints[1].app_socket: '/tmp/smrc-twice.sock' is also endpoints[0].app_socket",
     "'<path>' is also control_socket"),
    ('app_socket_is_control', lambda c: (c.update(control_socket='/tmp/smrc-ctl.sock'),
                                         c['endpoints'][0].update(app_socket='/tmp/smrc-ctl.sock')),
     "endpoints[0].app_socket: '/tmp/smrc-ctl.sock' is also control_socket",
     "'<path>' is also control_socket"),
    ('too_many_profiles', lambda c: c.update(ev_profiles={
        f'p{i}': {'evs_per_plane': 1, 'min_active': 1} for i in range(65)}),
     'ev_profiles: 65 profiles; at most 64', '<n> profiles; at most 64'),
]

# Found only once the EAL is up (lcores, devices): (case, change, EAL -l, message, doc).
BAD_SETUPS = [
    ('lcore_disabled', lambda c: c['endpoints'][0].update(lcore=7), '0-1',
     'endpoints[0].lcore: lcore 7 is not enabled (EAL -l/--lcores)',
     'lcore <n> is not enabled (EAL -l/--lcores)'),
    ('lcore_main', lambda c: c['endpoints'][1].update(lcore=0), '0-1',
     'endpoints[1].lcore: lcore 0 is the main lcore, which runs the control thread',
     'lcore <n> is the main lcore, which runs the control thread'),
    ('plane_lcore_disabled', lambda c: (c['endpoints'][0].update(lcore=1),
                                        c['endpoints'][0]['planes'][1].update(lcore=5)), '0-1',
     'endpoints[0].planes[1].lcore: lcore 5 is not enabled (EAL -l/--lcores)',
     'lcore <n> is not enabled (EAL -l/--lcores)'),
    ('one_lcore', lambda c: None, '0',
     'EAL -l: the main lcore 0 runs the control thread; softmrcd needs at least one more '
     '(e.g. -l 0-1)', 'softmrcd needs at least one more (e.g. -l 0-1)'),
    ('app_group', lambda c: c.update(app_group='nosuchgroup'), '0-1',
     "app_group: no group named 'nosuchgroup'", "no group named '<name>'"),
    ('app_socket_not_socket', lambda c: c['endpoints'][0].update(app_socket=os.devnull), '0-1',
     f"endpoints[0].app_socket: '{os.devnull}' exists and is not a socket",
     "'<path>' exists and is not a socket"),
    ('bad_device', lambda c: (c.pop('links'), [p.update(port=f'net_nosuchdriver{i}{j}')
                                               for i, e in enumerate(c['endpoints'])
                                               for j, p in enumerate(e['planes'])]),
     '0-1', "endpoints[0].planes[0].port: cannot probe 'net_nosuchdriver00': ",
     "cannot probe '<spec>': <reason>"),
]


def thread_cpu_ns(pid, name):
    """CPU time so far of the thread of `pid` called `name`, or None."""
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{tid}/comm') as f:
                if f.read().strip() != name:
                    continue
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                return int(f.read().split()[0])
    except OSError:
        pass
    return None


def idle_lcore_share(args, passes):
    """An endpoint with nothing to do on lcore 1 (CPU 1, EAL -l 0-1) and a
    busy loop pinned to CPU 1: the CPU time the lcore got over the busy
    loop's, over one second."""
    cfg = {'path_mtu': 1024, 'idle_yield_passes': passes,
           'stats': {'snapshot_ms': 20, 'log_interval_ms': 0},
           'endpoints': [{'name': 'a', 'planes': [dict(plane('a', 0), port='net_ring0')]}]}
    d = Daemon(args, f'idle_yield_{passes}', cfg).start()
    spin = subprocess.Popen([sys.executable, '-c', 'while True: pass'],
                            preexec_fn=lambda: os.sched_setaffinity(0, {1}))
    try:
        wait_for('the lcore', lambda: thread_cpu_ns(d.proc.pid, 'rte-worker-1'), timeout=15,
                 output=d.output())
        time.sleep(0.3)
        l0, s0 = thread_cpu_ns(d.proc.pid, 'rte-worker-1'), thread_cpu_ns(spin.pid, 'python3')
        time.sleep(1)
        l1, s1 = thread_cpu_ns(d.proc.pid, 'rte-worker-1'), thread_cpu_ns(spin.pid, 'python3')
    finally:
        spin.kill()
        spin.wait()
        d.proc.send_signal(signal.SIGTERM)
        code = d.wait()
    check(code == 0, f'exit status {code}', d.output())
    check(None not in (l0, l1, s0, s1), 'no CPU time read', d.output())
    return (l1 - l0) / max(1, s1 - s0)


def case_idle_yield(args):
    spinning = idle_lcore_share(args, 0)
    yielding = idle_lcore_share(args, 1)
    # Two busy threads on one CPU share it about evenly; a lcore that yields
    # after every empty pass gets far less than the busy loop.
    check(yielding < 0.5 and yielding < spinning / 2,
          f'lcore/busy loop CPU time: {yielding:.2f} yielding, {spinning:.2f} spinning')


def case_bad_config(args):
    with open(os.path.join(args.docs, 'configuration.md')) as f:
        doc = f.read()
    failures = []
    for name, change, expected, template in BAD_CONFIGS:
        cfg = two_endpoints()
        change(cfg)
        d = Daemon(args, 'bad_' + name, cfg)
        code, out, err = d.run(timeout=15)
        want = f'softmrcd: {d.cfg_path}: {expected}'
        # The last line: the EAL has spoken first where setup failed after it.
        if code != 2 or (err.strip().splitlines() or [''])[-1] != want:
            failures.append(f'{name}: exit {code}, stderr {err.strip()!r}, want {want!r}')
        if template not in doc:
            failures.append(f'{name}: docs/configuration.md does not list {template!r}')
    # A syntax error names the line and column.
    path = os.path.join(args.workdir, 'bad_syntax.yaml')
    with open(path, 'w') as f:
        f.write('path_mtu: 1024\nendpoints: [\n')
    r = subprocess.run([args.softmrcd, '--', '--config', path], capture_output=True, text=True,
                       timeout=15, check=False)
    if r.returncode != 2 or not r.stderr.startswith(f'softmrcd: {path}:3:1: YAML syntax error:'):
        failures.append(f'syntax: exit {r.returncode}, stderr {r.stderr!r}')
    # A key given twice (which a dict cannot hold, so the text is edited):
    # YAML would keep one value silently.
    d = Daemon(args, 'bad_duplicate_key')
    with open(d.cfg_path, 'w') as f:
        f.write(json.dumps(two_endpoints(), indent=1).replace(
            '"path_mtu": 1024,', '"path_mtu": 1024,\n "path_mtu": 4096,', 1))
    code, out, err = d.run(timeout=15)
    want = f'softmrcd: {d.cfg_path}: path_mtu: is given twice (lines 2 and 3)'
    if code != 2 or err.strip() != want:
        failures.append(f'duplicate_key: exit {code}, stderr {err.strip()!r}, want {want!r}')
    if 'is given twice (lines <a> and <b>)' not in doc:
        failures.append('duplicate_key: docs/configuration.md does not list it')
    for name, change, lcores, expected, template in BAD_SETUPS:
        cfg = two_endpoints()
        change(cfg)
        d = Daemon(args, 'bad_' + name, cfg)
        d.cmd[d.cmd.index('-l') + 1] = lcores
        code, out, err = d.run(timeout=30)
        want = f'softmrcd: {d.cfg_path}: {expected}'
        last = err.strip().splitlines()[-1] if err.strip() else ''
        if code != 2 or not last.startswith(want):
            failures.append(f'{name}: exit {code}, last stderr line {last!r}, want {want!r}...')
        if template not in doc:
            failures.append(f'{name}: docs/configuration.md does not list {template!r}')
    check(not failures, '\n'.join(failures))


def case_options(args):
    def run(argv):
        r = subprocess.run([args.softmrcd] + argv, capture_output=True, text=True, timeout=15,
                           check=False)
        return r.returncode, r.stdout, r.stderr

    code, out, _ = run(['--', '--help'])
    check(code == 0 and out.startswith('usage: ') and '--config FILE' in out, 'help', out)
    code, out, _ = run(['--help'])
    check(code == 0 and out.startswith('usage: '), 'help before --', out)
    for argv, message in [
        ([], 'softmrcd: --config: missing (softmrcd [EAL options] -- --config FILE)'),
        (['--', '--config'], 'softmrcd: --config: needs a value'),
        # An empty value is no missing option.
        (['--', '--config='], 'softmrcd: --config: empty file name'),
        (['--', '-c', ''], 'softmrcd: --config: empty file name'),
        (['--', '-c', 'x.yaml', '--frobnicate'],
         'softmrcd: --frobnicate: unknown option (see --help)'),
        # An option is named as given: a letter (even mid-cluster, where
        # argv[optind - 1] is the word before), a long option's word.
        (['--', '-c', 'x.yaml', '-zi'], 'softmrcd: -z: unknown option (see --help)'),
        (['--', '--config=x.yaml', '-iz'], 'softmrcd: -z: unknown option (see --help)'),
        (['--', '-ic'], 'softmrcd: -c: needs a value'),
        (['--', '-c', 'x.yaml', '--interactive=1'],
         'softmrcd: --interactive=1: unknown option (see --help)'),
        (['--', '-c', 'x.yaml', '--log-interval-ms', '-5'],
         "softmrcd: --log-interval-ms: '-5' is not 0..3600000"),
        (['--', '-c', 'x.yaml', 'extra'], "softmrcd: unexpected argument 'extra'"),
        # Checked with the other options, before the EAL and the file.
        (['--', '-c', '/nonexistent/x.yaml', '--linerate', 'rx:0'],
         "softmrcd: --linerate: 'rx:0' is not probe, rx:SIZE, rx-fcs:SIZE or tx:SIZE (SIZE 1..9000)"),
        (['--', '-c', '/nonexistent/x.yaml', '--linerate', 'fast'],
         "softmrcd: --linerate: 'fast' is not probe, rx:SIZE, rx-fcs:SIZE or tx:SIZE (SIZE 1..9000)"),
        (['--', '-c', '/nonexistent/x.yaml'],
         'softmrcd: /nonexistent/x.yaml: cannot open: No such file or directory'),
    ]:
        code, out, err = run(argv)
        check(code == 2 and err.strip() == message,
              f'{argv}: exit {code}, stderr {err.strip()!r}, want {message!r}')


if __name__ == '__main__':
    sys.exit(test_main(globals(), __doc__))
