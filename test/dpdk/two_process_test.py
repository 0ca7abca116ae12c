#!/usr/bin/env python3
"""softmrcd endpoints in separate processes: each --case runs two daemons,
a and b, each with its own configuration and EAL (its own --file-prefix,
the shared EAL config that memif needs), and checks what both say.

  memif           a and b over net_memif, one vdev per plane (a is each
                  plane's server), a Write flow a -> b limited by duration
                  and a WIMM flow b -> a limited by count; a's memif
                  sockets connected to and closed at once 100 times each
                  mid-transfer (a lives on, its links up); every byte
                  verified on both sides
  memif_sigterm   the same link, a Write flow a -> b without a limit; a
                  stopped by SIGTERM ends it, and b stops by itself once
                  it checked every message a completed
  memif_requester_gone  the same link and flow; a is frozen (SIGSTOP, so
                  that its memif link stays up and b learns nothing from
                  its ports) and answers nothing: b probes it, gives up after the flow's
                  requester_timeout_ms, and stops by itself with the
                  flow unfinished: an error, nothing wrong in what arrived
  memif_stalled_plane  a and b over net_memif, plane 1 through a
                  dpdk-testpmd that is frozen (SIGSTOP) mid-transfer: a's
                  port stalls, plane 0 carries the flow on; the operator
                  sets the plane down (a's control socket), which frees
                  what its port held (tx_plane_down), then up; testpmd
                  resumes and every message is verified
  bad_config      flows to peers: the checks a config gets, with the
                  messages docs/configuration.md lists
  fabric_memif    a and b as memif clients of smrc-fabric, 3 planes: random
                  loss on plane 0, a slow plane 1 that trims, plane 2 down
                  then up by the fabric's schedule mid-transfer, plane 0
                  blackholed one way and restored through the fabric's
                  telemetry; every byte verified, all three exit 0, and
                  the fabric's own
                  summary shows the losses, trims and link-down drops
  fabric_restart  a and b as memif clients of smrc-fabric, a transfer, both
                  stop (saying farewell to the fabric's ports); a second
                  pair on the same ports gets its transfer through too
  fabric_endpoint_killed  a and b as memif clients of smrc-fabric, a
                  transfer without end; one of them SIGKILLed (a, then b,
                  twice each): no farewell, the fabric's memif servers lose
                  their client under its lcore's bursts; the fabric keeps
                  running, and a last pair gets its transfer through
  fabric_srv6     a and b as memif clients of smrc-fabric, 2 planes, in
                  SRv6 mode (the fabric's link ev_mode srv6, so its
                  planes route on and shift the uSID path), one path
                  blackholed one way: nothing dropped at either end, every
                  byte verified
  fabric_killed   a and b as memif clients of smrc-fabric, a transfer
                  without end; the fabric SIGKILLed and started again, three
                  times: the endpoints live on, their memif clients
                  reconnect, and the transfer goes on, every byte verified
  fabric_stopped  a and b as memif clients of smrc-fabric, a transfer
                  without end; the fabric SIGKILLed, started again and
                  SIGSTOPped for 5 s as soon as it listens, while the
                  clients connect and give up: resumed, it meets their
                  dead connections and lives on, every link comes back,
                  every byte verified
  fabric_bad_config  smrc-fabric's bad files and command lines get the
                  messages docs/configuration.md lists, exit 2
  fabric_setup_signal  SIGTERM while smrc-fabric opens its configuration (a
                  FIFO no one writes) stops it cleanly, exit 0, saying so
  tap_plane_down  a and b in two network namespaces, each plane a net_tap
                  wired to a veth pair between the namespaces, on IPv4
                  (net_tap checks the IPv4 header checksums: a frame with
                  a bad one is dropped), a WIMM flow a -> b; a's tap of plane 1 is taken down mid-transfer
                  (ip link set ... down): both see the plane's EVs go
                  unusable, the other planes carry the transfer; it comes
                  back; SIGTERM to a, which ends the flow, and b stops by
                  itself: every byte verified

Both configs list the same `traffic`, so that each process knows the
other's QPNs and keys (app/softmrcd/traffic_plan.h). The two busy lcores
get a CPU each: a runs --lcores 0@1,1@0 and b 0@0,1@1. Exit 0 on success,
77 (skipped) where network namespaces cannot be made, 1 with the reason
and both daemons' output otherwise.
"""

import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmrcd_test import (Daemon, Failure, Skip, Telemetry, check, frames_in,  # noqa: E402
                           plane, summary_counts, telemetry_socket, test_main, wait_for)

LCORES = {'a': '0@1,1@0', 'b': '0@0,1@1', 'fabric': '0@0,1@1'}


def srv6_plane(ep, p):
    """Plane p's address as a uSID locator: block fcbb:bb0<p>, node uSID a or b."""
    return dict(plane(ep, p), ip=f'fcbb:bb0{p:x}:{ep}::')


def ipv4_plane(ep, p):
    """Plane p's address in IPv4: 10.0.<p>.10 for a, .11 for b."""
    host = {'a': 10, 'b': 11}[ep]
    return dict(plane(ep, p), ip=f'10.0.{p}.{host}')


def endpoint_and_peer(me, ports, srv6=False, ipv4=False, **hosted):
    """A configuration's endpoints and peers: `me` hosted on `ports` (one
    per plane, with the keys `hosted` adds), the other endpoint its peer;
    both in SRv6 mode, on uSID locators, if `srv6`; on IPv4 if `ipv4`."""
    other = 'b' if me == 'a' else 'a'
    addr = srv6_plane if srv6 else ipv4_plane if ipv4 else plane
    mode = {'ev_mode': 'srv6'} if srv6 else {}
    return {
        'endpoints': [dict(name=me, planes=[dict(port=port, **addr(me, p))
                                            for p, port in enumerate(ports)], **mode, **hosted)],
        'peers': [dict(name=other, planes=[addr(other, p) for p in range(len(ports))], **mode)],
    }


def config(me, ports, traffic, srv6=False, ipv4=False, **top):
    """One hosted endpoint `me` on `ports` (one per plane), the other a
    peer; `top`: more top-level keys."""
    return {
        **top,
        'path_mtu': 1024,  # memif and tap frames are at most 1518 bytes
        'stats': {'snapshot_ms': 20, 'log_interval_ms': 250},
        'ev_profiles': {'default': {'evs_per_plane': 4, 'min_active': 2}},
        **endpoint_and_peer(me, ports, srv6, ipv4),
        'traffic': traffic,
    }


def daemon(args, case, me, ports, traffic, netns=None, srv6=False, ipv4=False, **top):
    d = Daemon(args, f'2p_{case}_{me}', config(me, ports, traffic, srv6, ipv4, **top))
    i = d.cmd.index('-l')
    d.cmd[i:i + 2] = ['--lcores', LCORES[me]]
    if netns:
        d.cmd = ['ip', 'netns', 'exec', netns] + d.cmd
    return d


def both_output(a, b):
    return '--- a ---\n' + a.output() + '\n--- b ---\n' + b.output()


def final_output(a, b):
    """Both daemons' output, to the end: they are stopped first."""
    for d in (a, b):
        if d:
            d.kill()
            d.wait(5)
    return both_output(a, b) if b else a.output()


def mib(output):
    m = re.search(r'txgen: .* verified \(([\d.]+) MiB, every byte checked\)', output)
    return float(m.group(1)) if m else 0.0


def check_done(a, b, code_a, code_b, b_to_a=None, stop=('traffic done', 'traffic done')):
    """Both exited 0, each stopping for its reason in `stop`, and every
    message a flow sent was verified at the other end."""
    out = both_output(a, b)
    check(code_a == 0 and code_b == 0, f'exit status a {code_a}, b {code_b}', out)
    for d, why in zip((a, b), stop):
        check('softmrcd: PASS' in d.output(), 'no PASS line', out)
        check(f'stopping ({why})' in d.output(), f'{d.prefix} did not stop on {why}', out)
    sa, sb = summary_counts(a.output()), summary_counts(b.output())
    for name, s in (('a', sa), ('b', sb)):
        check(s['mismatches'] == 0 and s['errors'] == 0 and s['flushed'] == 0,
              f'{name}: {s}', out)
    # What a requester completed, its peer's responder verified, byte for byte.
    check(sa['posted'] == sa['completed'] == sb['verified'] > 0,
          f'a -> b: a posted {sa["posted"]}, completed {sa["completed"]}; b verified '
          f'{sb["verified"]}', out)
    if b_to_a is not None:
        check(sb['posted'] == sb['completed'] == sa['verified'] == b_to_a,
              f'b -> a: b posted {sb["posted"]}, completed {sb["completed"]}; a verified '
              f'{sa["verified"]}, want {b_to_a}', out)
    else:
        check(sb['posted'] == 0 and sa['verified'] == 0, 'unexpected traffic b -> a', out)
    check(mib(b.output()) > 0, 'b verified no bytes', out)
    for d, me in ((a, 'a'), (b, 'b')):
        for line in d.output().splitlines():
            if re.match(r'softmrcd: (t=[\d.]+s (peer|\w+ plane)|\w+: sent|txgen:)', line):
                print(f'{me}: {line}')
    return sa, sb


def wait_both(a, b, timeout=30):
    deadline = time.monotonic() + timeout
    code_a = a.wait(max(1, deadline - time.monotonic()))
    code_b = b.wait(max(1, deadline - time.monotonic()))
    return code_a, code_b


def row(t, cmd, key):
    """Row `key` of telemetry command `cmd`."""
    reply = t.query(cmd)
    check(key in reply, f'{cmd}: no {key} in {reply}')
    return reply[key]


def poll_row(what, t, cmd, key, cond, output=''):
    """Row `key` of `cmd` once cond(row) holds."""
    return wait_for(what, lambda: (lambda r: r if cond(r) else None)(row(t, cmd, key)),
                output=output)


def connect_and_close(path, times):
    """Connects to the UNIX socket at `path` and closes, `times` times."""
    for n in range(times):
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            try:
                s.connect(path)
            except OSError as e:
                raise Failure(f'connection {n + 1} to {path}: {e} (its server died?)') from None


def memif_pair(args, case, planes, traffic):
    """a, every plane's memif server, and b, its client, running `traffic`."""
    socks = [os.path.join(args.workdir, f'memif-p{p}.sock') for p in range(planes)]
    for s in socks:
        if os.path.exists(s):
            os.unlink(s)
    a = daemon(args, case, 'a', [memif_port(p, 'server', socks[p]) for p in range(planes)],
               traffic).start()
    try:
        # Server first: a memif client started first would wait for it
        # (reconnecting at growing intervals), and the test with it.
        wait_for('the memif servers\' sockets', lambda: a._read(0.05) and all(map(os.path.exists,
                                                                            socks)),
                 timeout=10, output=a.output())
        return a, daemon(args, case, 'b', [memif_port(p, 'client', socks[p])
                                           for p in range(planes)], traffic).start()
    except Failure as e:
        raise Failure(str(e) + '\n' + final_output(a, None)) from None


def case_memif(args):
    planes = 3
    messages_b_to_a = 2000
    traffic = [
        {'from': 'a', 'to': 'b', 'qps': 2, 'op': 'write', 'size': 16384, 'window': 4,
         'duration_ms': 1500},
        {'from': 'b', 'to': 'a', 'qps': 1, 'op': 'wimm', 'size': 8192, 'window': 4,
         'messages': messages_b_to_a},
    ]
    a, b = memif_pair(args, 'memif', planes, traffic)
    try:
        # Every plane carries data both ways, as b's telemetry shows, and
        # nothing was dropped.
        t = Telemetry(telemetry_socket(b.prefix))
        rows = wait_for('traffic on every plane',
                    lambda: (lambda r: r if all(r[f'b/{p}']['rx_packets'] > 0 and
                                                r[f'b/{p}']['tx_packets'] > 0
                                                for p in range(planes)) else None)(
                        t.query('/softmrc/planes,b')), output=a.output())
        check(all(rows[f'b/{p}']['in_use'] == 1 for p in range(planes)),
              f'a plane not in use: {rows}')
        drops = t.query('/softmrc/drops,b')['b']
        check(drops['total'] == 0 and drops['engine_rx_unknown_qpn'] == 0, f'b drops: {drops}')
        # Local programs that connect to a's memif sockets and close at once
        # (a probe, a script): DPDK's memif server aborted the process on
        # them (drivers/port/ethdev/hangup_guard.h). a serves on.
        for p in range(planes):
            connect_and_close(os.path.join(args.workdir, f'memif-p{p}.sock'), 100)
        ports_a = Telemetry(telemetry_socket(a.prefix)).query('/softmrc/ports,a')
        check(all(r['hangup_guard_sends'] > 0 and r['link_up'] == 1 for r in ports_a.values()),
              f'a met no client already gone, or lost a link: {ports_a}')
        code_a, code_b = wait_both(a, b)
    except Failure as e:
        raise Failure(str(e) + '\n' + final_output(a, b)) from None
    finally:
        a.kill()
        b.kill()
    check_done(a, b, code_a, code_b, messages_b_to_a)
    out = both_output(a, b)
    check('peer b answered a probe' in a.output() and 'peer a answered a probe' in b.output(),
          'a requester did not wait for its peer', out)
    for d, me in ((a, 'a'), (b, 'b')):
        check(re.search(rf'{me}\[.*planes 111 ', d.output()), f'{me} never used all planes',
              out)


def case_memif_sigterm(args):
    """A requester stopped by SIGTERM ends its flows: the responder, in
    the other process, learns how many messages there were, checks them
    all and stops by itself."""
    # No limit: only the signal ends the flow.
    traffic = [{'from': 'a', 'to': 'b', 'qps': 2, 'op': 'write', 'size': 16384, 'window': 4}]
    a, b = memif_pair(args, 'memif_sigterm', 2, traffic)
    until_sigterm(a, b, lambda: verified_at_b(a, b))


def verified_at_b(a, b, messages=100):
    """Waits until b, the responder, has verified more than `messages`."""
    t = Telemetry(telemetry_socket(b.prefix))
    wait_for('messages verified at b', lambda: t.query('/softmrc/stats,b')['b'][
        'txgen_verified'] > messages, timeout=20, output=a.output())


def case_memif_requester_gone(args):
    """A requester that answers nothing: its responder ends the flow after
    requester_timeout_ms, unfinished, and stops by itself."""
    timeout_ms = 1000
    traffic = [{'from': 'a', 'to': 'b', 'qps': 2, 'op': 'write', 'size': 16384, 'window': 4,
                'requester_timeout_ms': timeout_ms}]
    a, b = memif_pair(args, 'memif_requester_gone', 2, traffic)
    try:
        verified_at_b(a, b)
        a.proc.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        code_b = b.wait(timeout=20)
        waited = time.monotonic() - frozen
    except Failure as e:
        raise Failure(str(e) + '\n' + final_output(a, b)) from None
    finally:
        a.kill()
        b.kill()
    out = both_output(a, b)
    check(code_b == 1, f'b exit status {code_b}, want 1 (flows unfinished)', out)
    check(waited >= timeout_ms / 1000, f'b stopped {waited:.2f} s after a froze', out)
    check('stopping (traffic done)' in b.output(), 'b did not stop by itself', out)
    gone = re.findall(r'txgen: QP (\d+): requester a silent for (\d+) ms \(nothing arrived, no '
                      r'probe answered\): the flow ends unfinished after (\d+) messages',
                      b.output())
    check(sorted(q for q, _, _ in gone) == ['1', '2'], f'b ended flows {gone}', out)
    check(all(int(ms) >= timeout_ms for _, ms, _ in gone), f'b waited less: {gone}', out)
    sb = summary_counts(b.output())
    arrived = sum(int(n) for _, _, n in gone)
    check(sb['errors'] == 2 and sb['mismatches'] == 0 and sb['verified'] == arrived > 100,
          f'b: {sb}, messages arrived {arrived}', out)
    check('softmrcd: FAIL' in b.output(), 'b printed no FAIL line', out)
    for line in b.output().splitlines():
        if 'silent' in line or line.startswith('softmrcd: txgen:'):
            print(f'b: {line}')


def case_memif_stalled_plane(args):
    """A plane whose port stops taking frames with its link up (a frozen
    dpdk-testpmd forwards plane 1): after 1 ms it no longer holds the
    endpoint back, plane 0 carries the flow on, and once the port takes
    frames again the flow ends with every message verified."""
    s0, s1a, s1b = (os.path.join(args.workdir, n) for n in ('p0.sock', 'p1a.sock', 'p1b.sock'))
    for s in (s0, s1a, s1b):
        if os.path.exists(s):
            os.unlink(s)
    testpmd = subprocess.Popen(
        ['dpdk-testpmd', '--lcores', LCORES['fabric'], '--no-huge', '-m', '256', '--no-pci',
         '--file-prefix', '2p-stall-testpmd', '--log-level', 'lib.eal:warning',
         '--vdev', memif_port(0, 'server', s1a).replace('net_memif0', 'net_memif10'),
         '--vdev', memif_port(1, 'server', s1b).replace('net_memif1', 'net_memif11'),
         '--', '--forward-mode=io', '--nb-cores=1', '--no-lsc-interrupt', '--stats-period', '0',
         '--total-num-mbufs=8192'],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    a = b = None
    try:
        wait_for('testpmd\'s memif sockets', lambda: os.path.exists(s1a) and os.path.exists(s1b),
                 timeout=15)
        traffic = [{'from': 'a', 'to': 'b', 'qps': 1, 'op': 'write', 'size': 16384, 'window': 4,
                    'duration_ms': 6000}]
        ctl = os.path.join(args.workdir, 'ctl.sock')
        a = daemon(args, 'stall', 'a', [memif_port(0, 'server', s0),
                                        memif_port(1, 'client', s1a)], traffic,
                   control_socket=ctl).start()
        wait_for('a\'s memif socket', lambda: a._read(0.05) and os.path.exists(s0), timeout=10,
                 output=a.output())
        b = daemon(args, 'stall', 'b', [memif_port(0, 'client', s0),
                                        memif_port(1, 'client', s1b)], traffic).start()
        verified_at_b(a, b)
        ta, tb = Telemetry(telemetry_socket(a.prefix)), Telemetry(telemetry_socket(b.prefix))
        # Plane 1 in use end to end first (memif clients reconnect at
        # growing intervals, which on a loaded machine can take a while).
        wait_for('plane 1 to carry data to b', lambda: row(tb, '/softmrc/planes', 'b/1')[
            'rx_packets'] > 1000 and row(ta, '/softmrc/planes', 'a/1')['evs_usable'] == 4,
                 timeout=30, output=a.output())
        testpmd.send_signal(signal.SIGSTOP)
        poll_row('a to find plane 1 stalled', ta, '/softmrc/planes', 'a/1',
                 lambda r: r['tx_stalls'] >= 1, a.output())
        before = row(tb, '/softmrc/stats', 'b')['txgen_verified']
        poll_row('b to verify more while plane 1 is stalled', tb, '/softmrc/stats', 'b',
                 lambda r: r['txgen_verified'] > before + 20, b.output())
        # (Frames beyond what the stalled port holds are dropped, tx_stalled,
        # unless the engine took its EVs out of use first.)
        stalled = row(ta, '/softmrc/drops', 'a')['tx_stalled']
        usable = row(ta, '/softmrc/planes', 'a/1')['evs_usable']
        check(stalled > 0 or usable == 0,
              f'plane 1 stalled: {stalled} frames dropped, {usable} EVs still usable')
        check(row(ta, '/softmrc/planes', 'a/0')['tx_stalls'] == 0, 'plane 0 stalled too')
        # The operator takes the plane out of use: the frames its port held
        # are freed (tx_plane_down) and resent on plane 0.
        check(row(ta, '/softmrc/drops', 'a')['tx_plane_down'] == 0, 'tx_plane_down before')
        for state in ('down', 'up'):
            reply = control_request(ctl, f'port set a 1 {state}')
            check(reply.get('ok') is True, f'port set a 1 {state}: {reply}')
            if state == 'down':
                poll_row('a to free what plane 1 held', ta, '/softmrc/drops', 'a',
                         lambda r: r['tx_plane_down'] > 0, a.output())
        testpmd.send_signal(signal.SIGCONT)
        code_a, code_b = wait_both(a, b)
    except Failure as e:
        raise Failure(str(e) + '\n' + final_output(a, b)) from None
    finally:
        testpmd.send_signal(signal.SIGCONT)
        testpmd.kill()
        testpmd.wait()
        for d in (a, b):
            if d:
                d.kill()
    check_done(a, b, code_a, code_b)


def control_request(path, line):
    """One request to softmrcd's control socket (docs/controller.md), its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(10)
        c.connect(path)
        c.sendall(line.encode() + b'\n')
        reply = b''
        while not reply.endswith(b'\n'):
            chunk = c.recv(4096)
            check(chunk, f'{line}: the control socket closed after {reply!r}')
            reply += chunk
    return json.loads(reply)


def until_sigterm(a, b, body):
    """body() while a and b run; then SIGTERM to a, the requester, which
    ends its flow, and b, the responder, stops by itself once it checked
    every message: both exit 0, every message a completed verified at b."""
    try:
        body()
        a.proc.send_signal(signal.SIGTERM)
        code_a, code_b = wait_both(a, b, timeout=20)
    except Failure as e:
        raise Failure(str(e) + '\n' + final_output(a, b)) from None
    finally:
        a.kill()
        b.kill()
    check_done(a, b, code_a, code_b, stop=('SIGTERM', 'traffic done'))


def wimm_flow(qps=1, **limit):
    """A WIMM flow a -> b of 16 KiB messages, 8 in flight per QP, ending as
    `limit` says (none: without end)."""
    return [{'from': 'a', 'to': 'b', 'qps': qps, 'op': 'wimm', 'size': 16384, 'window': 8,
             **limit}]


def memif_port(n, role, sock):
    return f'net_memif{n},role={role},id=0,socket={sock},socket-abstract=no'


def fabric(args, name, cfg):
    """smrc-fabric with its own file prefix, on `cfg`."""
    f = Daemon(args, name, cfg)
    f.cmd[0] = args.smrc_fabric
    i = f.cmd.index('-l')
    f.cmd[i:i + 2] = ['--lcores', LCORES['fabric']]
    return f


def fabric_summary(output):
    """The fabric's summary per plane and direction: {(plane, dir): {counter: n}}."""
    hops = {}
    for m in re.finditer(r'^smrc-fabric: link 0 plane (\d+) (a_to_b|b_to_a): delivered (\d+) '
                         r'packets .*, trimmed (\d+), CE-marked (\d+), dropped (\d+)(.*)$',
                         output, re.M):
        c = {'delivered': int(m.group(3)), 'trims': int(m.group(4)), 'drops': int(m.group(6))}
        c.update({k: int(v) for k, v in re.findall(r'(\w+) (\d+)', m.group(7))})
        hops[(int(m.group(1)), m.group(2))] = c
    return hops


def start_fabric(args, name, planes, link, stats, options=()):
    """smrc-fabric (file prefix `name`) serving `link`, whose ports it adds:
    per plane a memif server for side a and one for side b. Once it
    listens: the fabric, and per side the memif client ports to join it
    with."""
    socks = {e: [os.path.join(args.workdir, f'fabric-{e}{p}.sock') for p in range(planes)]
             for e in ('a', 'b')}
    for s in socks['a'] + socks['b']:
        if os.path.exists(s):
            os.unlink(s)
    cfg = {
        'path_mtu': 1024,
        'stats': stats,
        'links': [dict(a=[memif_port(p, 'server', socks['a'][p]) for p in range(planes)],
                       b=[memif_port(planes + p, 'server', socks['b'][p]) for p in range(planes)],
                       **link)],
    }
    f = fabric(args, name, cfg).start(list(options))
    try:
        wait_for('the fabric\'s memif sockets', lambda: f._read(0.05) and all(
            map(os.path.exists, socks['a'] + socks['b'])), timeout=10, output=f.output())
    except Failure:
        f.kill()
        raise
    return f, {e: [memif_port(p, 'client', socks[e][p]) for p in range(planes)]
               for e in ('a', 'b')}


@contextlib.contextmanager
def around_fabric(f):
    """Yields a list for the daemons started on fabric f, and the fabrics
    started after it. A failure in the block carries the fabrics' output and
    that of the last pair of endpoints started (a, or a and b) to the end;
    neither a fabric nor any daemon outlives the block."""
    daemons = []
    try:
        yield daemons
    except Failure as e:
        # Fabrics started again are in the list too.
        fabrics = [f] + [d for d in daemons if d.cmd[0] == f.cmd[0]]
        endpoints = [d for d in daemons if d.cmd[0] != f.cmd[0]]
        pair = endpoints[-2:] if len(endpoints) % 2 == 0 else endpoints[-1:] + [None]
        raise Failure(str(e) + ''.join('\n--- fabric ---\n' + x.output() for x in fabrics) + '\n' +
                      (final_output(*pair) if endpoints else '')) from None
    finally:
        for d in [f] + daemons:
            d.kill()


def through_fabric(args, name, planes, link, traffic, srv6=False, during=None):
    """a and b as memif clients of smrc-fabric's `link` (its ports added),
    running `traffic`; during(f), if given, while they run. Returns the
    fabric and both daemons, their exit statuses, and all the output."""
    f, ports = start_fabric(args, f'2p_{name}_f', planes, link,
                            {'snapshot_ms': 20, 'log_interval_ms': 250},
                            ['--duration-ms', '20000'])
    with around_fabric(f) as daemons:
        a = daemon(args, name, 'a', ports['a'], traffic, srv6=srv6).start()
        daemons.append(a)
        b = daemon(args, name, 'b', ports['b'], traffic, srv6=srv6).start()
        daemons.append(b)
        if during:
            during(f)
        code_a, code_b = wait_both(a, b)
        f.proc.send_signal(signal.SIGTERM)
        code_f = f.wait(10)
    out = both_output(a, b) + '\n--- fabric ---\n' + f.output()
    check(code_f == 0, f'fabric exit status {code_f}', out)
    return f, a, b, code_a, code_b, out


def case_fabric_memif(args):
    planes = 3
    down_at_ms, down_for_ms = 1500, 500
    link = {
        'rate_gbps': 1, 'delay_us': 20, 'buffer_kib': 256, 'ecn_kib': 64,
        'planes': [{'plane': 0, 'loss': 0.01},
                   {'plane': 1, 'rate_gbps': 0.1, 'buffer_kib': 8, 'ecn_kib': 4}],
        # Counted from the first frame (a's probe): however slowly the
        # endpoints start on a loaded machine, the plane goes down and up
        # while the flow runs, whose duration counts from the probe's answer.
        'schedule_from': 'first_frame',
        'schedule': [{'at_ms': down_at_ms, 'plane': 2, 'state': 'down', 'for_ms': down_for_ms}],
    }
    traffic = wimm_flow(qps=2, duration_ms=2500)

    def during(f):
        # The fabric's telemetry: every plane carries frames both ways.
        t = Telemetry(telemetry_socket(f.prefix), ready='/softmrc/links')
        wait_for('frames both ways on every plane', lambda: all(
            r['a_to_b_packets'] > 0 and r['b_to_a_packets'] > 0
            for r in t.query('/softmrc/links').values()), output=f.output())
        ports = t.query('/softmrc/fabric/ports')
        check(len(ports) == 2 * planes and all(
            r['rx_packets'] > 0 and r['tx_packets'] > 0 and r['link_up'] == 1 and
            r['unmap_guard_timeouts'] == 0 for r in ports.values()), f'a port carried nothing: {ports}', f.output())
        # Pages from `first`, as softmrcd's reports (one page holds these).
        check(list(t.query('/softmrc/fabric/ports,1')) == list(ports)[1:], 'ports from 1')
        bad = t.query('/softmrc/links,x')
        check(bad == {'error': 'expected [<first>]'}, f'/softmrc/links,x: {bad}')
        # A fault set at run time through the fabric's telemetry, then lifted.
        reply = t.query('/softmrc/fabric/set,0,0,blackhole,on,a_to_b')
        check(reply == {'link0/0': {'requested': 'blackhole on (a_to_b)'}},
              f'blackhole: {reply}', f.output())
        p0 = poll_row('plane 0 a_to_b blackholed', t, '/softmrc/links', 'link0/0',
                      lambda r: r['a_to_b_drop_blackhole'] > 0, f.output())
        check(p0['a_to_b_blackhole'] == 1 and p0['b_to_a_blackhole'] == 0,
              f'blackhole state: {p0}', f.output())
        t.query('/softmrc/fabric/set,0,0,blackhole,off,a_to_b')
        poll_row('plane 0 blackhole lifted', t, '/softmrc/links', 'link0/0',
                 lambda r: r['a_to_b_blackhole'] == 0, f.output())
        reply = t.query('/softmrc/fabric/set,0,3,loss,0.1')
        check(reply == {'error': 'no plane 3 (planes are 0..2)'}, f'bad plane: {reply}')
        first = float(f.read_until(
            r'smrc-fabric: t=([\d.]+)s link 0: first frame, the schedule starts$').group(1))
        down = float(f.read_until(
            r'smrc-fabric: t=([\d.]+)s link 0 plane 2 down \(the ports\' links stay up\)').group(1))
        up = float(f.read_until(r'smrc-fabric: t=([\d.]+)s link 0 plane 2 up$').group(1))
        # Times as logged, to the ms: each change at its time after the
        # first frame, or at the fabric's first pass after it.
        check(down - first > down_at_ms / 1000 - 0.002 and
              up - first > (down_at_ms + down_for_ms) / 1000 - 0.002,
              f'first frame at {first}s, plane 2 down at {down}s, up at {up}s', f.output())
        p2 = poll_row('plane 2 up again', t, '/softmrc/links', 'link0/2', lambda r: r['up'] == 1)
        check(p2['a_to_b_drop_link_down'] > 0, f'plane 2 dropped nothing while down: {p2}',
              f.output())

    f, a, b, code_a, code_b, out = through_fabric(args, 'fabric', planes, link, traffic,
                                                  during=during)
    check(re.search(r'^smrc-fabric: t=[\d.]+s link 0 plane 0 blackhole on \(a_to_b\)$',
                    f.output(), re.M), 'the fabric did not log the blackhole', out)
    check_done(a, b, code_a, code_b)
    hops = fabric_summary(f.output())
    check(len(hops) == 2 * planes, f'no summary per plane and direction: {hops}', out)
    check(all(h['delivered'] > 0 for h in hops.values()), f'a hop delivered nothing: {hops}',
          out)
    check(hops[(0, 'a_to_b')].get('loss', 0) > 0 and hops[(0, 'b_to_a')].get('loss', 0) > 0,
          f'plane 0 lost nothing: {hops}', out)
    check(hops[(1, 'a_to_b')]['trims'] > 0, f'plane 1 trimmed nothing: {hops}', out)
    check(hops[(2, 'a_to_b')].get('link_down', 0) > 0, f'plane 2 down dropped nothing: {hops}',
          out)
    check(hops[(2, 'a_to_b')]['delivered'] > 0, 'plane 2 carried nothing', out)
    for line in f.output().splitlines():
        if re.match(r'smrc-fabric: (link|t=[\d.]+s link 0 plane|stopped)', line):
            print(f'fabric: {line}')


def case_fabric_srv6(args):
    """a and b in SRv6 mode through smrc-fabric, whose link says so: its
    planes route on the destination's active uSID and shift it away, so
    both ends take every frame (nothing dropped) and every byte verifies."""
    link = {'ev_mode': 'srv6', 'rate_gbps': 1, 'buffer_kib': 64,
            'schedule': [{'at_ms': 0, 'plane': 1, 'blackhole': True, 'evs': [0xc004],
                          'direction': 'a_to_b'}]}
    traffic = wimm_flow(duration_ms=1200)
    f, a, b, code_a, code_b, out = through_fabric(args, 'srv6', 2, link, traffic, srv6=True)
    check_done(a, b, code_a, code_b)
    for d, me in ((a, 'a'), (b, 'b')):
        ends = frames_in(d.output())
        check(list(ends) == [me] and ends[me][0] > 0 and ends[me][1] == 0,
              f'frames not taken as addressed to their receiver: {ends}', out)
    hops = fabric_summary(f.output())
    check(hops[(1, 'a_to_b')].get('ev_blackhole', 0) > 0,
          f'nothing on path uSID 0xc004 was dropped: {hops}', out)


def churn_fabric(args, name):
    """smrc-fabric of 2 planes of 1 Gb/s, for the cases whose endpoints or
    fabric come and go: start_fabric()'s fabric and ports."""
    return start_fabric(args, name, 2, {'rate_gbps': 1}, {'snapshot_ms': 20, 'log_interval_ms': 0})


def case_fabric_restart(args):
    """Endpoints that stop cleanly say farewell to smrc-fabric's memif
    servers, which then take nothing until their client has gone and a
    new one connected: a second pair of endpoints, started on the same
    ports, gets its transfer through the fabric that is still running."""
    traffic = wimm_flow(messages=100)
    f, ports = churn_fabric(args, '2p_restart_f')
    with around_fabric(f) as daemons:
        for run in (1, 2):
            a = daemon(args, f'restart{run}', 'a', ports['a'], traffic).start()
            daemons.append(a)
            b = daemon(args, f'restart{run}', 'b', ports['b'], traffic).start()
            daemons.append(b)
            code_a, code_b = wait_both(a, b)
            check_done(a, b, code_a, code_b)
            # The fabric saw both clients go, with their farewells.
            sides = {f.read_until(r'smrc-fabric: t=[\d.]+s link 0 plane 0 side (a|b): port \S+ '
                                  r'down \(its peer closed\)$').group(1) for _ in range(2)}
            check(sides == {'a', 'b'}, f'farewells from {sides}', f.output())
        f.proc.send_signal(signal.SIGTERM)
        code_f = f.wait(10)
    check(code_f == 0, f'fabric exit status {code_f}', f.output())
    for line in f.output().splitlines():
        if re.match(r'smrc-fabric: (link|t=[\d.]+s link 0 plane \d side)', line):
            print(f'fabric: {line}')


def case_fabric_endpoint_killed(args):
    endless, last = wimm_flow(), wimm_flow(messages=100)
    f, ports = churn_fabric(args, '2p_killed_f')
    with around_fabric(f) as daemons:
        for turn, victim in enumerate('abab'):
            a = daemon(args, f'killed{turn}', 'a', ports['a'], endless).start()
            daemons.append(a)
            b = daemon(args, f'killed{turn}', 'b', ports['b'], endless).start()
            daemons.append(b)
            t = Telemetry(telemetry_socket(b.prefix))
            wait_for(f'turn {turn}: b to verify messages',
                     lambda: row(t, '/softmrc/stats', 'b')['txgen_verified'] > 0, timeout=20,
                     output=both_output(a, b))
            (a if victim == 'a' else b).kill()
            # The other side's planes go with it, without a farewell.
            time.sleep(0.3)
            check(f.proc.poll() is None, f'turn {turn}: the fabric exited {f.proc.poll()} '
                  f'when {victim} was killed')
            (b if victim == 'a' else a).kill()
            print(f'turn {turn}: {victim} killed mid-transfer, the fabric goes on')
        a = daemon(args, 'killed_last', 'a', ports['a'], last).start()
        daemons.append(a)
        b = daemon(args, 'killed_last', 'b', ports['b'], last).start()
        daemons.append(b)
        check_done(a, b, *wait_both(a, b))
        f.proc.send_signal(signal.SIGTERM)
        code_f = f.wait(10)
    check(code_f == 0, f'fabric exit status {code_f}', f.output())


def every_link_up(a, b):
    """Whether every port of daemons a and b has its link up."""
    return all(p['link_up'] for d, me in ((a, 'a'), (b, 'b'))
               for p in Telemetry(telemetry_socket(d.prefix)).query(f'/softmrc/ports,{me}').values())


def case_fabric_killed(args):
    """smrc-fabric SIGKILLed under a running transfer and started again,
    three times: the endpoints' memif clients reconnect each time, the
    transfer goes on, and every message is verified."""
    traffic = wimm_flow(duration_ms=0)
    f, ports = churn_fabric(args, '2p_fkilled_f')
    with around_fabric(f) as daemons:
        a = daemon(args, 'fkilled', 'a', ports['a'], traffic).start()
        daemons.append(a)
        b = daemon(args, 'fkilled', 'b', ports['b'], traffic).start()
        daemons.append(b)
        t = Telemetry(telemetry_socket(b.prefix))
        for turn in range(3):
            # b verifying more needs one plane only: every link must be back
            # before the next kill, or one reconnect would cover two kills.
            before = row(t, '/softmrc/stats', 'b')['txgen_verified']
            wait_for(f'turn {turn}: b to verify more, every link up',
                     lambda: row(t, '/softmrc/stats', 'b')['txgen_verified'] > before + 50
                     and every_link_up(a, b), timeout=30, output=both_output(a, b))
            f.kill()
            time.sleep(0.5)
            check(a.proc.poll() is None and b.proc.poll() is None,
                  f'turn {turn}: an endpoint exited with the fabric', both_output(a, b))
            f, _ = churn_fabric(args, f'2p_fkilled_f{turn}')
            daemons.append(f)
            print(f'turn {turn}: fabric killed and restarted')
        before = row(t, '/softmrc/stats', 'b')['txgen_verified']
        wait_for('b to verify more after the last restart, every link up',
                 lambda: row(t, '/softmrc/stats', 'b')['txgen_verified'] > before + 50
                 and every_link_up(a, b), timeout=30, output=both_output(a, b))
        for d, me in ((a, 'a'), (b, 'b')):
            ports = Telemetry(telemetry_socket(d.prefix)).query(f'/softmrc/ports,{me}')
            # Each time the first tries, 100 ms on, find the dead fabric's socket.
            check(len(ports) == 2 and all(p['reconnects'] >= 3 and p['reconnect_failures'] >= 3
                                          for p in ports.values()),
                  f'{me} reconnected its ports less than 3 times, or never failed to: {ports}')
        a.proc.send_signal(signal.SIGTERM)
        code_a, code_b = wait_both(a, b, timeout=20)
        check_done(a, b, code_a, code_b, stop=('SIGTERM', 'traffic done'))


def case_fabric_stopped(args):
    """smrc-fabric SIGKILLed under a transfer, started again and SIGSTOPped
    as soon as it listens, for 5 s: the endpoints' memif clients connect,
    wait for a HELLO that does not come, give up (their restart closes the
    connection the fabric never accepted) and try again. Resumed, the
    fabric first accepts those dead connections (DPDK 22.11's memif server
    aborted the process on them, drivers/port/ethdev/hangup_guard.h), then
    serves the clients: every link comes back and every message is
    verified."""
    # Both ends outwait a silence of over 5 s: b's responder, a's retries.
    traffic = wimm_flow(duration_ms=0, requester_timeout_ms=30000)
    patient = {'qp': {'retry_exp': 25}}
    f, ports = churn_fabric(args, '2p_fstopped_f')
    with around_fabric(f) as daemons:
        a = daemon(args, 'fstopped', 'a', ports['a'], traffic, **patient).start()
        daemons.append(a)
        b = daemon(args, 'fstopped', 'b', ports['b'], traffic, **patient).start()
        daemons.append(b)
        t = Telemetry(telemetry_socket(b.prefix))
        before = row(t, '/softmrc/stats', 'b')['txgen_verified']
        wait_for('b to verify, every link up',
                 lambda: row(t, '/softmrc/stats', 'b')['txgen_verified'] > before + 50
                 and every_link_up(a, b), timeout=30, output=both_output(a, b))
        f.kill()
        f, _ = churn_fabric(args, '2p_fstopped_f0')
        daemons.append(f)
        f.proc.send_signal(signal.SIGSTOP)
        # Longer than a client waits for its HELLO (3.2 s) before it restarts.
        time.sleep(5)
        f.proc.send_signal(signal.SIGCONT)
        check(a.proc.poll() is None and b.proc.poll() is None,
              'an endpoint exited while the fabric was stopped', both_output(a, b))
        before = row(t, '/softmrc/stats', 'b')['txgen_verified']
        wait_for('every link up again, b to verify more',
                 lambda: row(t, '/softmrc/stats', 'b')['txgen_verified'] > before + 50
                 and every_link_up(a, b), timeout=30, output=both_output(a, b) + f.output())
        # And programs that connect to its sockets and close at once.
        for side in ('a', 'b'):
            for p in range(2):
                connect_and_close(os.path.join(args.workdir, f'fabric-{side}{p}.sock'), 50)
        check(f.proc.poll() is None and every_link_up(a, b), 'the fabric died, or a link',
              f.output())
        fports = Telemetry(telemetry_socket(f.prefix), ready='/softmrc/links').query(
            '/softmrc/fabric/ports')
        # The same process-wide count in every row: dead connections were met.
        check(all(r['hangup_guard_sends'] > 0 for r in fports.values()),
              f'the fabric met no client that had given up: {fports}', f.output())
        a.proc.send_signal(signal.SIGTERM)
        code_a, code_b = wait_both(a, b, timeout=20)
        check_done(a, b, code_a, code_b, stop=('SIGTERM', 'traffic done'))


def good_fabric_config(planes=3):
    return {'path_mtu': 1024, 'links': [{
        'a': [f'net_null{p}' for p in range(planes)],
        'b': [f'net_null{planes + p}' for p in range(planes)]}]}


def drop_b_port(c):
    c['links'][0]['b'].pop()


# (case, change to a good config, the message after "smrc-fabric: <file>: ",
# doc template or None where configuration.md's generic messages cover it)
BAD_FABRIC_CONFIGS = [
    ('no_links', lambda c: c.update(links=[]),
     'links: missing (at least one link to emulate)',
     'missing (at least one link to emulate)'),
    ('no_ports', lambda c: c['links'][0].update(a=[]),
     'links[0].a: needs 1..32 ports, one per plane', 'needs 1..32 ports, one per plane'),
    ('planes_differ', drop_b_port,
     'links[0].b: 2 ports, but a has 3 (one port per plane on each side)',
     '<n> ports, but a has <m> (one port per plane on each side)'),
    ('port_not_spec', lambda c: c['links'][0]['a'].__setitem__(1, {'x': 1}),
     'links[0].a[1]: must be a device spec, not a map', 'must be a device spec, not <what>'),
    ('port_twice', lambda c: c['links'][0]['b'].__setitem__(0, 'net_null0,size=64'),
     "links[0].b[0]: 'net_null0' is also links[0].a[0]", "'<device>' is also <key>"),
    # The link keys are softmrcd's, read by the same code.
    ('rate', lambda c: c['links'][0].update(rate_gbps=0),
     'links[0].rate_gbps: 0 is out of range 0.001..10000', None),
    ('schedule', lambda c: c['links'][0].update(schedule=[{'at_ms': 5, 'plane': 1}]),
     'links[0].schedule[0]: needs one of state, loss, blackhole, rate_factor, corrupt or '
     'corrupt_icrc', None),
    ('plane_override', lambda c: c['links'][0].update(planes=[{'plane': 3, 'loss': 0.1}]),
     'links[0].planes[0].plane: 3 is out of range 0..2', None),
    ('unknown', lambda c: c['links'][0].update(colour='red'),
     'links[0].colour: unknown key', None),
    ('mtu', lambda c: c.update(path_mtu=1000),
     'path_mtu: 1000 is not 256, 512, 1024, 2048, 4096 or 9000', None),
    # Found once the EAL is up.
    ('no_device', lambda c: c['links'][0]['a'].__setitem__(0, 'net_nosuch0'),
     "links[0].a[0]: cannot probe 'net_nosuch0': ", "cannot probe '<spec>': <reason>"),
    ('lcore', lambda c: c['links'][0].update(lcore=0),
     'links[0].lcore: lcore 0 is the main lcore, which runs the control thread', None),
]

# (arguments after "--", the message after "smrc-fabric: ")
BAD_FABRIC_OPTIONS = [
    ([], '--config: missing (smrc-fabric [EAL options] -- --config FILE)'),
    (['--config'], '--config: needs a value'),
    (['--config='], '--config: empty file name'),  # not a missing --config
    (['--config', 'x.yaml', '--duration-ms', '1s'], "--duration-ms: '1s' is not 0..86400000"),
    (['--config', 'x.yaml', '--log-interval-ms', '-1'],
     "--log-interval-ms: '-1' is not 0..3600000"),
    (['--config', 'x.yaml', '--colour'], '--colour: unknown option (see --help)'),
    # The letter, not the word before its cluster.
    (['--config', 'x.yaml', '-zh'], '-z: unknown option (see --help)'),
    (['--config', '/nonexistent.yaml'], '/nonexistent.yaml: cannot open: No such file or directory'),
]


def case_fabric_bad_config(args):
    """smrc-fabric's own checks, its link keys read by softmrcd's reader,
    its command line; the messages are those docs/configuration.md lists."""
    with open(os.path.join(args.docs, 'configuration.md')) as f:
        doc = f.read()
    failures = []
    for name, change, expected, template in BAD_FABRIC_CONFIGS:
        cfg = good_fabric_config()
        change(cfg)
        f = fabric(args, 'fabric_bad_' + name, cfg)
        code, _, err = f.run(['--duration-ms', '100'], timeout=15)
        want = f'smrc-fabric: {f.cfg_path}: {expected}'
        # The last line: the EAL may have spoken before a device failed.
        if code != 2 or not (err.strip().splitlines() or [''])[-1].startswith(want):
            failures.append(f'{name}: exit {code}, stderr {err.strip()!r}, want {want!r}')
        if template and template not in doc:
            failures.append(f'{name}: docs/configuration.md does not list {template!r}')
    # A link key given twice (a dict cannot hold it, so the text is edited).
    f = fabric(args, 'fabric_bad_duplicate_key', None)
    with open(f.cfg_path, 'w') as out:
        out.write(json.dumps(good_fabric_config(), indent=1).replace(
            '"a": [', '"loss": 0.1,\n   "loss": 0.2,\n   "a": [', 1))
    code, _, err = f.run(['--duration-ms', '100'], timeout=15)
    want = f'smrc-fabric: {f.cfg_path}: links[0].loss: is given twice (lines 5 and 6)'
    if code != 2 or err.strip() != want:
        failures.append(f'duplicate_key: exit {code}, stderr {err.strip()!r}, want {want!r}')
    f = fabric(args, 'fabric_options', None)
    base = f.cmd[:f.cmd.index('--') + 1]
    for argv, expected in BAD_FABRIC_OPTIONS:
        r = subprocess.run(base + argv, capture_output=True, text=True, timeout=15, check=False)
        if r.returncode != 2 or r.stderr.strip() != 'smrc-fabric: ' + expected:
            failures.append(f'{argv}: exit {r.returncode}, stderr {r.stderr.strip()!r}')
    r = subprocess.run([args.smrc_fabric, '--help'], capture_output=True, text=True, timeout=15,
                       check=False)
    if (r.returncode != 0 or '--duration-ms N' not in r.stdout or 'net_memif' not in r.stdout
            or '0 (the default): run until SIGINT or' not in r.stdout):
        failures.append(f'--help: exit {r.returncode}, {r.stdout!r}')
    # A good file runs, forwards nothing on net_null, and stops by itself.
    f = fabric(args, 'fabric_good', good_fabric_config())
    code, out, err = f.run(['--duration-ms', '300'], timeout=20)
    if code != 0 or 'smrc-fabric: stopped (duration)' not in out:
        failures.append(f'good config: exit {code}, {out!r} {err!r}')
    check(not failures, '\n'.join(failures))


def case_fabric_setup_signal(args):
    """SIGTERM before smrc-fabric forwards (here while it opens its
    configuration, a FIFO no one writes) stops it as at any other time: a
    clean exit that says where it stopped, not death by the signal."""
    fifo = os.path.join(args.workdir, 'fabric.fifo')
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    f = fabric(args, 'fabric_setup_signal', None)
    f.cmd[f.cmd.index(f.cfg_path)] = fifo
    f.start()
    code, out = f.signal_when(lambda: wait_for('the configuration FIFO opened', f.blocked_on_fifo,
                                               timeout=30, output=f.output()))
    check(code == 0, f'exit status {code}, want 0', out)
    check(f'smrc-fabric: stopped (SIGTERM) while reading {fifo}, before any setup' in out,
          'no line saying the configuration read stopped', out)
    check('cannot open' not in out and 'Interrupted' not in out, 'an error for the open', out)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    if r.returncode != 0:
        raise Failure(f'{" ".join(cmd)}: exit {r.returncode}: {r.stderr.strip()}')
    return r.stdout


class Namespaces:
    """Two network namespaces joined plane by plane: in each, a persistent
    multi-queue tap (net_tap attaches to it) wired to its end of a veth
    pair by two tc mirred redirects, so a frame written to a's tap leaves
    b's. Only these namespaces' interfaces carry the traffic; deleting the
    namespaces removes every interface made here."""

    CLONE_NEWNET = 0x40000000

    def __init__(self, planes):
        self.ns = {e: f'smrc2p-{e}{os.getpid()}' for e in ('a', 'b')}
        self.made = []
        self.planes = planes
        self.ip = {}  # per namespace, an `ip -batch -` reading commands

    def __enter__(self):
        try:
            for e in ('a', 'b'):
                r = subprocess.run(['ip', 'netns', 'add', self.ns[e]], capture_output=True,
                                   text=True, check=False)
                if r.returncode != 0:
                    raise Skip(f'cannot make a network namespace: {r.stderr.strip()}')
                self.made.append(self.ns[e])
                # No kernel chatter (IPv6 DAD, MLD) on the wires.
                run(['ip', 'netns', 'exec', self.ns[e], 'sysctl', '-qw',
                     'net.ipv6.conf.all.disable_ipv6=1',
                     'net.ipv6.conf.default.disable_ipv6=1'])
            na, nb = self.ns['a'], self.ns['b']
            for p in range(self.planes):
                run(['ip', 'link', 'add', f'v{p}', 'netns', na, 'type', 'veth', 'peer', 'name',
                     f'v{p}', 'netns', nb])
                for e in ('a', 'b'):
                    ns, tap = self.ns[e], self.tap(e, p)
                    run(['ip', '-n', ns, 'tuntap', 'add', 'dev', tap, 'mode', 'tap',
                         'multi_queue'])
                    for dev in (tap, f'v{p}'):
                        run(['ip', '-n', ns, 'link', 'set', dev, 'up'])
                        run(['tc', '-n', ns, 'qdisc', 'add', 'dev', dev, 'ingress'])
                    for src, dst in ((tap, f'v{p}'), (f'v{p}', tap)):
                        run(['tc', '-n', ns, 'filter', 'add', 'dev', src, 'ingress', 'protocol',
                             'all', 'u32', 'match', 'u32', '0', '0', 'action', 'mirred',
                             'egress', 'redirect', 'dev', dst])
            for e in ('a', 'b'):
                self.ip[e] = subprocess.Popen(['ip', '-n', self.ns[e], '-force', '-batch', '-'],
                                              stdin=subprocess.PIPE, text=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for ip in self.ip.values():
            ip.stdin.close()
            try:
                ip.wait(5)
            except subprocess.TimeoutExpired:
                ip.kill()
                ip.wait()
        self.ip = {}
        for ns in self.made:
            subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False)
        self.made = []

    @staticmethod
    def tap(e, p):
        return f't{e}{p}'

    def packet_socket(self, e, dev):
        """A raw socket on `dev` in e's namespace (what it sends, the kernel
        sends on dev), made from this process (setns for one call): a new
        process entering the namespace can take seconds while both CPUs
        poll."""
        libc = ctypes.CDLL(None, use_errno=True)
        with open('/proc/self/ns/net') as home, open(f'/run/netns/{self.ns[e]}') as there:
            if libc.setns(there.fileno(), self.CLONE_NEWNET) != 0:
                raise Failure(f'setns: {os.strerror(ctypes.get_errno())}')
            try:
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
                sock.bind((dev, 0))
            finally:
                libc.setns(home.fileno(), self.CLONE_NEWNET)
        return sock

    def link(self, e, dev, state):
        """`ip link set <dev> <state>` in e's namespace, at once: by the ip
        started there before the daemons (a new `ip -n` pays for entering
        the namespace, which can take seconds while both CPUs poll)."""
        self.ip[e].stdin.write(f'link set {dev} {state}\n')
        self.ip[e].stdin.flush()


def check_port_checksums(ta, tb, sock):
    """net_tap checks IPv4 header checksums (RX offload): on b every frame
    a plane took came with the port's verdict, and a frame the port found
    bad is dropped as bad_ip_header; a, configured without the offload,
    took none."""
    for t, e, on in ((ta, 'a', 0), (tb, 'b', 1)):
        ports = t.query(f'/softmrc/ports,{e}')
        check(all(r['rx_ipv4_checksum'] == on for r in ports.values()),
              f'{e}: ports with the checksum offload {1 - on}: {ports}')
        def every_plane_received():
            planes = t.query(f'/softmrc/planes,{e}')
            return planes if all(r['rx_packets'] > 0 for r in planes.values()) else None

        # Snapshots lag: wait for one in which every plane took frames.
        planes = wait_for(f'{e} to receive on every plane', every_plane_received)
        check(all(r['rx_ipv4_checksum_by_port'] == on * r['rx_packets'] for r in planes.values()),
              f'{e}: frames with the port\'s checksum verdict, offload {on}: {planes}')
    before = row(tb, '/softmrc/drops', 'b')['rx_bad_ip_header']
    # An MRC probe's first 28 bytes to b's plane 0 with a wrong IPv4 header
    # checksum, sent by the kernel on b's tap, which hands it to b's port.
    eth = bytes.fromhex('02000000 0b00 02000000 0a00 0800'.replace(' ', ''))
    ip = bytes.fromhex('4500 0024 0000 4000 4011 dead 0a00000a 0a00000b'.replace(' ', ''))
    udp = bytes.fromhex('c000 12b7 0010 0000'.replace(' ', '')) + bytes(8)
    sock.send(eth + ip + udp)
    poll_row('b to drop the frame with a bad IPv4 checksum', tb, '/softmrc/drops', 'b',
             lambda r: r['rx_bad_ip_header'] == before + 1)


def case_tap_plane_down(args):
    planes = 3
    down = 1
    # Unlimited: taking a tap down can take the kernel seconds while both
    # CPUs poll, so the test, not a duration, decides when the flow stops.
    traffic = wimm_flow(qps=2)
    with Namespaces(planes) as net:
        def ports(e):
            return [f'net_tap{p},iface={net.tap(e, p)}' for p in range(planes)]

        bad_frames = net.packet_socket('b', net.tap('b', 0))
        # a leaves every IPv4 header checksum to itself.
        a = daemon(args, 'tap', 'a', ports('a'), traffic, netns=net.ns['a'], ipv4=True,
                   rx_ipv4_checksum_offload=False).start()
        b = daemon(args, 'tap', 'b', ports('b'), traffic, netns=net.ns['b'], ipv4=True).start()

        def body():
            ta = Telemetry(telemetry_socket(a.prefix))
            tb = Telemetry(telemetry_socket(b.prefix))

            def verified():
                return row(tb, '/softmrc/stats', 'b')['txgen_verified']

            # Two daemons starting on a loaded machine can take seconds.
            wait_for('b to verify messages', verified, timeout=20, output=both_output(a, b))
            check_port_checksums(ta, tb, bad_frames)
            net.link('a', net.tap('a', down), 'down')
            a.read_until(rf'a plane {down} down \(link down\)', timeout=15)
            # a's plane is out of use, and b's QPs took its EVs out of use
            # too when a's port status arrived.
            pa = poll_row('a to drop the plane', ta, '/softmrc/planes,a', f'a/{down}',
                          lambda r: r['in_use'] == 0 and r['evs_usable'] == 0)
            check(pa['link_up'] == 0, f'a/{down}: {pa}')
            # net_tap claims link-status interrupts, so the port reads its
            # link every 10 ms; DPDK 22.11's net_tap never raises one, which
            # is how the change above was seen.
            port = row(ta, '/softmrc/ports,a', f'a/{down}')
            check(port['driver'] == 'net_tap' and port['link_interrupt'] == 1 and
                  port['link_interrupts'] == 0, f'a/{down}: {port}')
            pb = poll_row('b to stop using the plane', tb, '/softmrc/planes,b', f'b/{down}',
                          lambda r: r['evs_usable'] == 0)
            check(pb['link_up'] == 1 and pb['in_use'] == 1,
                  f'b/{down}: its own link never went down: {pb}')
            for q in (1, 2):
                qp = row(tb, f'/softmrc/qp,b,{q}', f'b/{q}')
                check(qp['port_status_rx'] >= 1 and qp['usable_evs'] == qp['evs'] * 2 // 3,
                      f'b/{q} did not take plane {down} out of use: {qp}')
            others = tb.query('/softmrc/planes,b')
            check(all(others[f'b/{p}']['evs_usable'] > 0 for p in range(planes) if p != down),
                  f'b lost other planes: {others}')
            # The other planes carry the transfer.
            v0 = verified()
            wait_for(f'messages verified while plane {down} is down', lambda: verified() > v0,
                     timeout=10, output=both_output(a, b))
            check(row(ta, '/softmrc/planes,a', f'a/{down}')['in_use'] == 0,
                  'the plane came back by itself')
            # ... and a's periodic line shows the plane and its EVs out of use.
            a.read_until(r'^softmrcd: t=[\d.]+s a\[.*planes 101 .*evs 16/24\]', timeout=10)
            net.link('a', net.tap('a', down), 'up')
            a.read_until(rf'a plane {down} up \(link up\)', timeout=15)
            poll_row('b to use the plane again', tb, '/softmrc/planes,b', f'b/{down}',
                     lambda r: r['evs_usable'] > 0)
            v2 = verified()
            wait_for('messages after the plane came back', lambda: verified() > v2,
                 output=both_output(a, b))
        until_sigterm(a, b, body)


PLANES_C = [{'mac': f'02:00:00:00:0c:{p:02x}', 'ip': f'fd00:0:0:{p}::c'} for p in range(2)]

# (case, change to a's config, the message after "softmrcd: <file>: ", doc template)
BAD_CONFIGS = [
    ('ev_mode', lambda c: c['peers'][0].update(ev_mode='stev'),
     "traffic[0].to: 'b' has ev_mode stev, but 'a' has udp",
     "'<name>' has ev_mode <mode>, but '<name>' has <mode>"),
    ('same_address', lambda c: c['peers'][0]['planes'][1].update(ip=plane('a', 1)['ip']),
     "peers[0].planes[1].ip: 'fd00:0:0:1::a' is also the address of 'a' on this plane",
     "'<address>' is also the address of '<name>' on this plane"),
    ('out_of_reach', lambda c: (
        c['endpoints'].append({'name': 'c', 'planes': PLANES_C}),
        [p.pop('port') for p in c['endpoints'][0]['planes']],
        c.update(links=[{'endpoints': ['a', 'c']}])),
     "traffic[0].to: 'b' is out of reach: 'a' is in links[0], whose planes reach only 'c'",
     "'<name>' is out of reach: '<name>' is in links[<l>], whose planes reach only '<name>'"),
    ('regions', lambda c: c.update(limits={'max_regions': 1}),
     "traffic: needs 2 registered regions on endpoint 'a', above limits.max_regions (1)",
     "needs <n> registered regions on endpoint '<name>', above limits.max_regions (<m>)"),
    ('peer_qps', lambda c: (c.update(limits={'max_qps': 3}),
                            c['peers'].append({'name': 'c', 'planes': PLANES_C}),
                            c['traffic'].append({'from': 'c', 'to': 'b', 'qps': 2})),
     "traffic: needs 4 QPs on endpoint 'b', above limits.max_qps (3)",
     "needs <n> QPs on endpoint '<name>', above limits.max_qps (<m>)"),
]


def case_bad_config(args):
    """Flows to peers get their own checks, with the messages that
    docs/configuration.md lists; a flow between two peers is accepted."""
    with open(os.path.join(args.docs, 'configuration.md')) as f:
        doc = f.read()
    traffic = [{'from': 'a', 'to': 'b', 'qps': 2, 'duration_ms': 100}]
    ports = [f'net_null{p}' for p in range(2)]
    failures = []
    for name, change, expected, template in BAD_CONFIGS:
        d = daemon(args, 'bad_' + name, 'a', ports, traffic)
        cfg = config('a', ports, traffic)
        change(cfg)
        with open(d.cfg_path, 'w') as f:
            json.dump(cfg, f, indent=1)
        code, _, err = d.run(timeout=15)
        want = f'softmrcd: {d.cfg_path}: {expected}'
        if code != 2 or err.strip() != want:
            failures.append(f'{name}: exit {code}, stderr {err.strip()!r}, want {want!r}')
        if template not in doc:
            failures.append(f'{name}: docs/configuration.md does not list {template!r}')
    # Accepted: a flow between two peers (another process's; it only counts
    # for the QPNs). The load passes, and the EAL's single lcore stops it.
    cfg = config('a', ports, traffic + [{'from': 'c', 'to': 'b'}])
    cfg['peers'].append({'name': 'c', 'planes': PLANES_C})
    d = daemon(args, 'peer_flow', 'a', ports, [])
    with open(d.cfg_path, 'w') as f:
        json.dump(cfg, f, indent=1)
    d.cmd[d.cmd.index('--lcores') + 1] = '0'
    code, _, err = d.run(timeout=30)
    if code != 2 or 'EAL -l: the main lcore 0 runs the control thread' not in err:
        failures.append(f'peer_flow: exit {code}, stderr {err.strip()!r}')
    check(not failures, '\n'.join(failures))


if __name__ == '__main__':
    sys.exit(test_main(globals(), __doc__, 'smrc-fabric'))
