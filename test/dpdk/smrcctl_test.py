#!/usr/bin/env python3
"""smrcctl against a running softmrcd: each --case checks one part.

  commands     every command: dev/port/ev/stats/events with --json parsed;
               an EV denied (its counters stop, the others go on) and
               restored; a plane taken down (its EVs unusable here and at
               the peer) and up again
  blackhole    an EV blackholed in the emulated fabric goes ASSUMED_BAD,
               'events --follow' shows it, a probe of it goes unanswered
               (exit 5) while the others answer; lifted, it returns to GOOD
  profiles     every invalid profile move refused with its documented
               errno; a profile EV denied reaches the QPs
  permission   root only by default; a member of control_group gets in;
               an outsider is refused at connect, and by SO_PEERCRED when
               the socket's mode is opened up (counted and logged)
  state_file   profiles and plane admin states survive a restart; a bad
               state file stops the daemon with its message
  socket       the socket under clients that misbehave: one that shuts
               down its sending side still gets every reply; one that
               never reads its replies is not read either (the daemon's
               memory stays bounded, others are served, every reply
               arrives in order once it reads); a line too long; bytes
               that are not UTF-8 quoted back as U+FFFD; an idle
               connection closed after control_idle_ms while a follower
               stays; at the fd limit a connection is told why; 'stats a'
               shows only a
  storm        a seeded stream of random, mostly well-formed commands
               (SMRC_CTL_SEED, SMRC_CTL_ROUNDS): each answered with a
               documented exit status, errno and JSON; profiles' existence
               and states as a model of them says; afterwards the traffic
               flows again and the daemon exits 0
  client       smrcctl against fake control sockets, no softmrcd: replies
               that are not the protocol's (exit 3 with a message, never
               a crash); its own options' missing and bad values refused
               before anything is sent, events --follow --count honoured;
               a daemon that does not reply, or does not take the
               connection, ends smrcctl in its --reply-timeout-ms (exit
               6), SIGINT in the wait ends it as SIGINT does, and
               following waits for events however long they take

Runs two endpoints over the in-process fabric with a flow a -> b until
SIGTERM (softmrcd_test.py's helpers), but for the client case. Exit 0 on
success, 1 otherwise.
"""

import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmrcd_test import (Daemon, Failure, Telemetry, check, telemetry_socket,  # noqa: E402
                           test_main, two_endpoints, wait_for)

EXIT_REFUSED, EXIT_USAGE, EXIT_NO_DAEMON, EXIT_PERMISSION, EXIT_UNANSWERED, EXIT_NO_REPLY = \
    1, 2, 3, 4, 5, 6


class Ctl:
    def __init__(self, args, sock):
        self.args = args
        self.sock = sock

    def run(self, *words, user=None, json_out=True, timeout=15):
        cmd = [self.args.smrcctl, '--socket', self.sock] + (['--json'] if json_out else [])
        cmd += list(words)
        if user is not None:
            cmd = ['setpriv', '--reuid=nobody', '--regid=nogroup'] + user + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        return r.returncode, r.stdout, r.stderr

    def ok(self, *words):
        code, out, err = self.run(*words)
        check(code == 0, f'smrcctl {" ".join(words)}: exit {code}: {err}')
        return json.loads(out)

    def refused(self, errno, text, *words):
        code, out, err = self.run(*words)
        want = f'smrcctl: {errno}: '
        check(code == EXIT_REFUSED and err.startswith(want) and text in err,
              f'smrcctl {" ".join(words)}: exit {code}, stderr {err!r}, want {want}...{text}...')
        reply = json.loads(out)
        check(reply['ok'] is False and reply['errno'] == errno, f'--json reply {reply}')
        return err


def start(args, name, **extra):
    cfg = two_endpoints(**extra)
    cfg['traffic'][0]['duration_ms'] = 0  # until SIGTERM
    cfg['links'][0].update({'rate_gbps': 1, 'delay_us': 20})
    cfg['control_socket'] = os.path.join(args.workdir, 'ctl.sock')
    d = Daemon(args, 'ctl_' + name, cfg).start(['--log-interval-ms', '0'])
    try:
        d.read_until(r'^softmrcd: control socket ')
        ctl = Ctl(args, cfg['control_socket'])
        wait_for('traffic', lambda: ctl.ok('stats')['totals'][1]['txgen_verified'] > 0)
    except BaseException:  # no daemon outlives a case that could not start it
        d.proc.kill()
        d.proc.wait()
        raise
    return d, ctl


def stop(d):
    d.proc.send_signal(signal.SIGTERM)
    check(d.wait() == 0, 'exit status after SIGTERM', d.output())


def evs(ctl, ep, qpn):
    return {row['ev']: row for row in ctl.ok('ev', 'show', ep, str(qpn))}


def case_commands(args):
    d, ctl = start(args, 'commands')
    try:
        dev = ctl.ok('dev', 'show')
        check(dev['ports'] == 2 and dev['port_mask'] == 6 and
              dev['ev_fmt_modes'] == ['udp', 'stev', 'srv6'] and dev['srv6_max_path_bits'] == 240 and
              'nscc' in dev['cc_algorithms'] and dev['endpoints'] == ['a', 'b'], f'dev {dev}')
        ports = {r['name']: r for r in ctl.ok('port', 'show')}
        check(set(ports) == {'a/0', 'a/1', 'b/0', 'b/1'} and ports['a/0']['in_use'] == 1, f'{ports}')
        stats = ctl.ok('stats')
        check({'planes', 'ports', 'qps', 'drops', 'totals', 'control'} <= set(stats), f'{stats}')
        check(len(stats['qps']) == 4 and stats['drops'][0]['name'] == 'a', f'{stats["qps"]}')
        qp = ctl.ok('stats', 'qp', 'a', '1')
        check(qp[0]['state'] == 'RTS' and qp[0]['tx_data_packets'] > 0, f'{qp}')
        # Every human-readable command prints something and exits 0.
        for words in (['dev', 'show'], ['port', 'show'], ['ev', 'show', 'a', '1'], ['stats'],
                      ['events'], ['profile', 'ev', 'show', '1']):
            code, out, err = ctl.run(*words, json_out=False)
            check(code == 0 and out.strip(), f'{words}: exit {code} {err}')

        # Deny EV 2 (plane 0, UDP port 0xc002): traffic leaves it.
        e = evs(ctl, 'a', 1)
        check(len(e) == 8 and e[2]['value'] == '0xc002' and e[2]['state'] == 'GOOD', f'{e}')
        row = ctl.ok('ev', 'deny', 'a', '1', '2')
        check(row['state'] == 'DENIED', f'deny: {row}')
        # Until the other EVs have all carried more (however slowly a loaded
        # machine runs the flow), the denied one carries nothing.
        before = evs(ctl, 'a', 1)
        after = wait_for('traffic on EVs 0, 1, 3 and 4', lambda: (lambda e: e if all(
            e[i]['tx_packets'] > before[i]['tx_packets'] for i in (0, 1, 3, 4)) else None)(
                evs(ctl, 'a', 1)), timeout=10)
        check(after[2]['tx_packets'] == before[2]['tx_packets'], f'denied EV sent: {after[2]}')
        check(ctl.ok('ev', 'restore', 'a', '1', '2')['state'] == 'GOOD', 'restore')
        wait_for('the restored EV to carry packets',
                 lambda: evs(ctl, 'a', 1)[2]['tx_packets'] > after[2]['tx_packets'], timeout=10)
        ctl.refused('ENOENT', 'unknown QPN', 'ev', 'deny', 'a', '9', '1')
        ctl.refused('ENOENT', "no endpoint named 'z'", 'ev', 'show', 'z', '1')
        ctl.refused('EINVAL', 'is not a QPN', 'ev', 'deny', 'a', 'x', '1')

        # Plane 1 down: its EVs go unusable here and at the peer, then back.
        row = ctl.ok('port', 'set', 'a', '1', 'down')
        check(row['admin_up'] == 0 and row['in_use'] == 0 and row['evs_usable'] == 0, f'{row}')
        wait_for('b to lose plane 1', lambda: {r['name']: r for r in ctl.ok('port', 'show', 'b')}
                 ['b/1']['evs_usable'] == 0)
        before = evs(ctl, 'a', 1)
        time.sleep(0.3)
        after = evs(ctl, 'a', 1)
        check(all(after[i]['tx_packets'] == before[i]['tx_packets'] for i in range(4, 8)),
              f'plane 1 still carries: {after}')
        check(sum(after[i]['tx_packets'] - before[i]['tx_packets'] for i in range(4)) > 0,
              f'the traffic stopped: plane 0 carried nothing either: {after}')
        row = ctl.ok('port', 'set', 'a', '1', 'up')
        check(row['in_use'] == 1 and row['evs_usable'] == 8, f'up: {row}')
        wait_for('b to use plane 1 again', lambda: {r['name']: r for r in ctl.ok('port', 'show', 'b')}
                 ['b/1']['evs_usable'] == 8)
        ctl.refused('EINVAL', "no plane '7'", 'port', 'set', 'a', '7', 'down')
        code, _, err = ctl.run('port', 'set', 'a', '1', 'sideways', json_out=False)
        check(code == EXIT_USAGE and 'usage: port' in err, f'usage: exit {code} {err}')
        code, _, err = ctl.run('frobnicate', json_out=False)
        check(code == EXIT_USAGE and "unknown command 'frobnicate'" in err, f'{code} {err}')
        code, _, err = Ctl(args, '/nonexistent/ctl.sock').run('dev', 'show')
        check(code == EXIT_NO_DAEMON and 'cannot connect' in err, f'{code} {err}')
        check(ctl.ok('stats')['control']['failed'] >= 4, 'failed requests counted')
        stop(d)
    finally:
        d.kill()
    check(re.search(r'a plane 1 down \(set down\)', d.output()), 'no plane log line', d.output())


def case_blackhole(args):
    d, ctl = start(args, 'blackhole')
    follow = None
    try:
        t = Telemetry(telemetry_socket(d.prefix))
        follow = subprocess.Popen([args.smrcctl, '--socket', ctl.sock, '--json', 'events',
                                   '--follow'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        time.sleep(0.3)
        # EV 1 of plane 0 rides in UDP source port 0xc001 = 49153.
        t.query('/softmrc/fabric/set,0,0,blackhole_ev,49153')

        def next_event(state, timeout=8):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                ready, _, _ = select.select([follow.stdout], [], [], 0.2)
                if ready:
                    line = follow.stdout.readline()
                    e = json.loads(line)
                    if e['endpoint'] == 'a' and e['ev'] == 1 and e['state'] == state:
                        return e
            raise Failure(f'no {state} event for EV 1\n' + d.output())

        e = next_event('ASSUMED_BAD')
        check(e['value'] == '0xc001' and e['port'] == 1 and e['plane'] == 0 and
              e['profile'] == 1 and e['old_state'] == 'GOOD' and e['losses'] >= 1 and
              e['drop_count'] == 0 and e['qpn'] in (1, 2), f'event {e}')
        shown = evs(ctl, 'a', e['qpn'])[1]
        check(shown['state'] == 'ASSUMED_BAD', f'ev show {shown} after {e}')
        code, out, err = ctl.run('ev', 'probe', 'a', 'b', '--plane', '0', '--count', '2',
                                 '--timeout-ms', '200')
        probe = json.loads(out)
        check(code == EXIT_UNANSWERED and probe['unanswered'] == 2, f'probe: {code} {probe} {err}')
        by_ev = {r['ev']: r for r in probe['evs']}
        check(by_ev[1]['answered'] == 0 and all(by_ev[i]['answered'] == 2 and
                                                 by_ev[i]['rtt_min_ns'] >= 40000 for i in (0, 2, 3)),
              f'probe rows {by_ev}')
        check(evs(ctl, 'a', e['qpn'])[1]['probes_sent'] > 0, 'the engine does not probe it')
        t.query('/softmrc/fabric/set,0,0,restore_ev,49153')
        e = next_event('GOOD')
        check(e['old_state'] == 'ASSUMED_BAD', f'restored {e}')
        probe = ctl.ok('ev', 'probe', 'a', 'b', '--evs', '1,5')
        check(probe['unanswered'] == 0 and [r['answered'] for r in probe['evs']] == [1, 1], f'{probe}')
        history = ctl.ok('events')
        check(any(h['state'] == 'ASSUMED_BAD' and h['ev'] == 1 for h in history), f'{history}')
        ctl.refused('E2BIG', 'at most 256 per request', 'ev', 'probe', 'a', 'b', '--count', '100')
        ctl.refused('ENOENT', "no peer named 'a'", 'ev', 'probe', 'a', 'a')
        stop(d)
    finally:
        if follow:
            follow.kill()
            follow.wait()
        d.kill()


def case_profiles(args):
    d, ctl = start(args, 'profiles')
    try:
        p = ('profile',)
        ctl.ok(*p, 'fmt', 'create', '10')
        ctl.refused('EEXIST', 'format profile 10 exists', *p, 'fmt', 'create', '10')
        ctl.refused('EINVAL', 'INIT -> ONLINE is not a move', *p, 'fmt', 'set', '10', 'state', 'online')
        ctl.refused('EINVAL', 'cannot go OFFLINE without a mode', *p, 'fmt', 'set', '10', 'state',
                    'offline')
        # The address and the SRH's segment, full: no slot for the destination.
        ctl.ok(*p, 'fmt', 'set', '10', 'mode', 'srv6', 'widths', ','.join((['32'] + ['16'] * 6) * 2),
               'state', 'offline')
        ctl.refused('ENOTSUP', 'frames SRv6 paths of at most 240', *p, 'fmt', 'set', '10', 'state',
                    'online')
        ctl.ok(*p, 'fmt', 'set', '10', 'widths', '32,16,16,16,16', 'state', 'online')
        ctl.ok(*p, 'fmt', 'create', '11')
        ctl.refused('E2BIG', 'format_too_wide_for_mode', *p, 'fmt', 'set', '11', 'mode', 'udp',
                    'widths', '16,8', 'state', 'offline')
        ctl.ok(*p, 'fmt', 'set', '11', 'mode', 'udp', 'widths', '16', 'state', 'offline')
        ctl.ok(*p, 'fmt', 'set', '11', 'state', 'online')
        ctl.refused('EBUSY', 'is ONLINE', *p, 'fmt', 'set', '11', 'widths', '8')
        ctl.ok(*p, 'ev', 'create', '5')
        ctl.refused('EINVAL', 'INIT -> ONLINE is not a move', *p, 'ev', 'set', '5', 'state', 'online')
        ctl.refused('ENOENT', 'no format profile 12', *p, 'ev', 'set', '5', 'mode', 'explicit', 'fmt',
                    '12', 'count', '2', 'fields', '16:0:0:65535:65535', 'state', 'offline')
        ctl.refused('EINVAL', 'init_val_wider_than_field', *p, 'ev', 'set', '5', 'mode', 'explicit',
                    'fmt', '11', 'count', '2', 'fields', '16:65536:0:0:0', 'state', 'offline')
        ctl.ok(*p, 'ev', 'set', '5', 'mode', 'explicit', 'fmt', '11', 'count', '2', 'fields',
               '16:0:0:65535:65535', 'min_active', '1', 'state', 'offline')
        ctl.refused('EINVAL', 'EV 0 is unpopulated', *p, 'ev', 'set', '5', 'state', 'online')
        ctl.ok(*p, 'ev', 'replace', '5', '0', '0xc000', '1')
        ctl.refused('EINVAL', 'port 3 is not in 1..2', *p, 'ev', 'replace', '5', '1', '0xc001', '3')
        ctl.refused('EINVAL', 'ev_bits_beyond_fields', *p, 'ev', 'replace', '5', '1', '0xc00101', '2')
        ctl.ok(*p, 'ev', 'replace', '5', '1', '0xc001', '2')
        ctl.ok(*p, 'ev', 'set', '5', 'state', 'online')
        shown = ctl.ok(*p, 'ev', 'show', '5')
        check(shown['state'] == 'ONLINE' and [e['value'] for e in shown['evs']] == ['0xc000', '0xc001'],
              f'{shown}')
        ctl.refused('EBUSY', 'is ONLINE', *p, 'ev', 'set', '5', 'count', '3')
        ctl.refused('EBUSY', 'take it OFFLINE', *p, 'ev', 'replace', '5', '0', '0xc002', '1')
        ctl.refused('EINVAL', 'ONLINE -> INIT is not a move', *p, 'ev', 'set', '5', 'state', 'init')
        ctl.refused('EBUSY', 'is used by ONLINE EV profile 5', *p, 'fmt', 'set', '11', 'state',
                    'offline')
        ctl.refused('EBUSY', 'is ONLINE', *p, 'ev', 'destroy', '5')
        ctl.refused('ENOENT', 'has no EV 0x', *p, 'ev', 'ev-state', '5', '0xc000', '2', 'denied')
        ctl.refused('ENOENT', 'no format profile 99', *p, 'fmt', 'destroy', '99')
        ctl.ok(*p, 'ev', 'create', '6')
        ctl.ok(*p, 'ev', 'set', '6', 'mode', 'auto', 'state', 'offline')
        ctl.refused('ENOTSUP', 'no automatic EVs', *p, 'ev', 'set', '6', 'state', 'online')
        ctl.ok(*p, 'ev', 'set', '6', 'mode', 'generated', 'fmt', '11', 'count', '4', 'fields',
               '16:0xc000:0:1:0x3')
        check([e['port'] for e in ctl.ok(*p, 'ev', 'show', '6')['evs']] == [1, 2, 1, 2], 'generated')
        # Ids are 64 bits wide wherever a profile is named (an EV profile's
        # fmt once took 32).
        big = str(2**64 - 1)
        ctl.ok(*p, 'fmt', 'create', big)
        ctl.ok(*p, 'fmt', 'set', big, 'mode', 'udp', 'widths', '16', 'state', 'offline')
        ctl.ok(*p, 'fmt', 'set', big, 'state', 'online')
        check(ctl.ok(*p, 'ev', 'set', '6', 'fmt', big)['fmt'] == 2**64 - 1, 'a 64-bit fmt id')
        ctl.ok(*p, 'cc', 'create', '3')
        ctl.refused('EINVAL', 'cannot go OFFLINE without an algorithm', *p, 'cc', 'set', '3',
                    'state', 'offline')
        ctl.ok(*p, 'cc', 'set', '3', 'algorithm', 'nscc', 'state', 'offline')
        ctl.refused('EINVAL', 'cannot go ONLINE without a config', *p, 'cc', 'set', '3', 'state',
                    'online')
        ctl.refused('EINVAL', "no NSCC parameter 'colour'", *p, 'cc', 'set', '3', 'colour=1')
        cc = ctl.ok(*p, 'cc', 'set', '3', 'link_gbps', '100', 'base_rtt_us', '10', 'gamma=0.5',
                    'state', 'online')
        check(cc['state'] == 'ONLINE' and cc['config']['gamma'] == 0.5, f'{cc}')
        ctl.refused('EPERM', 'declared in the configuration file', *p, 'cc', 'set', '1', 'state',
                    'offline')
        check(ctl.ok(*p, 'cc', 'show', '1')['attached_qps'] == 4, 'QPs attached to cc 1')
        # A declared profile's EV denied reaches every QP that uses it.
        ctl.ok(*p, 'ev', 'ev-state', '1', '0xc001', '1', 'denied')
        check(all(evs(ctl, ep, q)[1]['state'] == 'DENIED' for ep in 'ab' for q in (1, 2)),
              'profile denial did not reach the QPs')
        ctl.ok(*p, 'ev', 'ev-state', '1', '0xc001', '1', 'good')
        check(evs(ctl, 'a', 1)[1]['state'] == 'GOOD', 'profile restore')
        with open(os.path.join(args.docs, 'controller.md')) as f:
            doc = f.read()
        for text in ('EINVAL', 'EBUSY', 'ENOENT', 'E2BIG', 'ENOTSUP', 'EEXIST', 'ENOSPC', 'EPERM',
                     'is not a move', 'cannot go OFFLINE without', 'is unpopulated',
                     'declared in the configuration file', 'frames SRv6 paths of at most 240'):
            check(text in doc, f'docs/controller.md does not mention {text!r}')
        stop(d)
    finally:
        d.kill()


def case_permission(args):
    d, ctl = start(args, 'permission', control_group='adm')
    try:
        check(oct(os.stat(ctl.sock).st_mode & 0o777) == '0o660' and os.stat(ctl.sock).st_gid == 4,
              'socket mode and group')
        code, _, err = ctl.run('dev', 'show', user=['--clear-groups'])
        check(code == EXIT_PERMISSION and 'permission denied' in err, f'nobody: {code} {err}')
        code, out, err = ctl.run('dev', 'show', user=['--groups=adm'])
        check(code == 0 and json.loads(out)['ports'] == 2, f'member of adm: {code} {err}')
        os.chmod(ctl.sock, 0o666)  # a mistake: softmrcd still checks who connects
        code, _, err = ctl.run('dev', 'show', user=['--clear-groups'])
        check(code == EXIT_PERMISSION and "uid 65534" in err and "not in group 'adm'" in err,
              f'opened socket: {code} {err}')
        d.read_until(r"softmrcd: control: refused a connection: uid 65534 \(pid \d+\) is not root "
                     r"and not in group 'adm'")
        check(ctl.ok('stats')['control']['refused'] == 1, 'refusal not counted')
        stop(d)
    finally:
        d.kill()


def case_state_file(args):
    state = os.path.join(args.workdir, 'state.json')
    if os.path.exists(state):
        os.remove(state)
    d, ctl = start(args, 'state_file', control_state_file=state)
    try:
        ctl.ok('profile', 'fmt', 'create', '11')
        ctl.ok('profile', 'fmt', 'set', '11', 'mode', 'stev', 'widths', '16,16', 'state', 'offline')
        ctl.ok('profile', 'fmt', 'set', '11', 'state', 'online')
        ctl.ok('profile', 'ev', 'create', '4')
        ctl.ok('profile', 'ev', 'set', '4', 'mode', 'generated', 'fmt', '11', 'count', '8',
               'fields', '16:0xc000:0:3:0x3/16:0:0:0:0', 'state', 'offline')
        ctl.ok('profile', 'ev', 'ev-state', '4', '0xc0', '2', 'denied')
        ctl.ok('profile', 'ev', 'set', '4', 'state', 'online')
        ctl.ok('port', 'set', 'a', '1', 'down')
        stop(d)
    finally:
        d.kill()
    d, ctl = start(args, 'state_file', control_state_file=state)
    try:
        check(ctl.ok('profile', 'fmt', 'show', '11')['state'] == 'ONLINE', 'format restored')
        p = ctl.ok('profile', 'ev', 'show', '4')
        check(p['state'] == 'ONLINE' and p['mode'] == 'generated' and len(p['evs']) == 8 and
              p['evs'][7]['state'] == 'DENIED' and p['evs'][7]['port'] == 2, f'EV profile {p}')
        row = {r['name']: r for r in ctl.ok('port', 'show', 'a')}['a/1']
        check(row['admin_up'] == 0 and row['in_use'] == 0, f'plane admin state: {row}')
        ctl.ok('port', 'set', 'a', '1', 'up')
        stop(d)
    finally:
        d.kill()
    with open(state, 'w') as f:
        f.write('{"profiles": {"fmt_profiles": [{"id": 4, "state": "ONLINE"}], '
                '"ev_profiles": [], "cc_profiles": []}, "ports": []}')
    cfg = two_endpoints(control_state_file=state)
    cfg['control_socket'] = os.path.join(args.workdir, 'ctl.sock')
    code, out, err = Daemon(args, 'ctl_state_bad', cfg).run(timeout=30)
    want = f'control_state_file: {state}: EINVAL: format profile 4 cannot go OFFLINE without a mode'
    check(code == 2 and want in err, f'bad state file: exit {code}, stderr {err!r}')


ERRNOS = {'EINVAL', 'E2BIG', 'EBUSY', 'ENOENT', 'ENOTSUP', 'EEXIST', 'ENOSPC', 'EPERM'}
KINDS = ('fmt', 'ev', 'cc')
# The life cycle's moves (docs/controller.md, "Profiles").
MOVES = {('INIT', 'OFFLINE'), ('OFFLINE', 'ONLINE'), ('ONLINE', 'OFFLINE'), ('OFFLINE', 'INIT')}


class Storm:
    """Draws controller commands from a seed and checks each answer against
    what the documentation promises and a model of the profiles."""

    def __init__(self, ctl, seed):
        self.ctl = ctl
        self.seed = seed
        self.rng = random.Random(seed)
        # kind -> {id: state}; declared ids are changed only in the file.
        self.profiles = {k: {p['id']: p['state'] for p in ctl.ok('profile', k, 'show')}
                         for k in KINDS}
        self.declared = {k: set(self.profiles[k]) for k in KINDS}
        # What a command took from the traffic (a plane down, an EV denied),
        # as the command that gives it back and the step by which it must:
        # paths gone for long fail the QPs, as they should.
        self.taken = []
        self.steps = 0
        self.codes = {}
        self.udp16 = {1}  # formats known to be UDP [16]: the declared 1, and the recipe's
        self.stepped = 0  # recipe steps taken

    def pick(self, *choices):
        return self.rng.choice(choices)

    def some(self, words, p=0.5):
        return list(words) if self.rng.random() < p else []

    def fail(self, words, why):
        raise Failure(f'storm (SMRC_CTL_SEED={self.seed}): smrcctl {" ".join(words)}: {why}')

    def an_id(self, kind):
        known = list(self.profiles[kind])
        if known and self.rng.random() < 0.7:
            return str(self.rng.choice(known))
        return str(self.pick(0, 1, 2, 3, 10, 11, 12, 20, 63, 64, 65, 255, 4096, 2**32, 2**53 + 1,
                             2**64 - 1, 2**64, -1))

    def recipe(self):
        """A well-formed next step in the life of a profile made here: it must
        succeed. None when there is nothing to step."""
        kind = self.pick(*KINDS)
        made = [i for i in self.profiles[kind] if i not in self.declared[kind]]
        if not made:
            return ['profile', kind, 'create'], set()
        pid = self.rng.choice(made)
        state = self.profiles[kind][pid]
        head = ['profile', kind, 'set', str(pid)]
        if state == 'ONLINE':
            # A format stays ONLINE while an ONLINE EV profile uses it.
            return head + ['state', 'offline'], {'EBUSY'} if kind == 'fmt' else set()
        to = 'offline' if state == 'INIT' else self.pick('online', 'online', 'init')
        if to == 'init':
            return head + ['state', 'init'], set()
        # The whole configuration again: a random command may have spoiled it.
        if kind == 'fmt':
            return head + ['mode', 'udp', 'widths', '16', 'state', to], set()
        if kind == 'cc':
            return head + ['algorithm', 'nscc', 'link_gbps', '100', 'base_rtt_us', '10',
                           'state', to], set()
        fmts = [i for i, st in self.profiles['fmt'].items() if st == 'ONLINE' and i in self.udp16]
        if not fmts:
            return None
        return head + ['mode', 'generated', 'fmt', str(self.rng.choice(fmts)), 'count', '4',
                       'min_active', '1', 'event_mask', 'good,assumed_bad,denied', 'fields',
                       '16:0xc000:0:1:0x3', 'state', to], set()

    def command(self):
        ep = self.pick('a', 'a', 'b', 'b', 'z', '', 'a,b', '\u00e9')
        qpn = self.pick('1', '2', '1', '2', '0', '9', 'x', '-1', '4294967297')
        ev = self.pick('0', '1', '2', '5', '7', '8', '64', 'x')
        plane = self.pick('0', '1', '0', '1', '2', '7', '-1', 'x')
        number = self.pick('0', '1', '2', '3', '8', '16', '4096', '4097', '0x10', 'x', '-1',
                           '99999999999999999999')
        state = self.pick('init', 'offline', 'online', 'bogus')
        kind = self.pick(*KINDS)
        pid = self.an_id(kind)
        value = self.pick('0xc000', '0xc001', '0xc002', '0xc100', '0', '0x10000', 'x')
        port = self.pick('1', '2', '0', '3')
        r = self.rng.randrange(22)
        if r == 0:
            return ['dev', 'show']
        if r == 1:
            return ['port', 'show'] + self.some([ep])
        if r == 2:
            return ['port', 'set', ep, plane, self.pick('up', 'down', 'up', 'sideways')]
        if r == 3:
            return ['ev', 'show', ep, qpn]
        if r in (4, 5):
            return ['ev', self.pick('deny', 'restore'), ep, qpn, ev]
        if r == 6:
            return (['ev', 'probe', ep, self.pick('a', 'b', 'z')] + self.some(['--plane', plane]) +
                    self.some(['--evs', self.pick('0', '0,1', '1,9', '', '0,,1', '300')]) +
                    self.some(['--count', self.pick('1', '2', '0', '300')]) +
                    ['--timeout-ms', self.pick('1', '20', '50', '0', '10001')])
        if r == 7:
            return ['events']
        if r == 8:
            return ['stats'] + self.some([ep])
        if r == 9:
            return ['stats', 'qp', ep, qpn]
        if r in (10, 11):
            return ['profile', kind, 'show'] + self.some([pid], 0.8)
        if r in (12, 13):
            return ['profile', kind, 'create'] + self.some([self.an_id(kind)], 0.7)
        if r == 14:
            return ['profile', kind, 'destroy', pid]
        if r == 15:
            return (['profile', 'fmt', 'set', self.an_id('fmt')] +
                    self.some(['mode', self.pick('udp', 'stev', 'srv6', 'bogus')]) +
                    self.some(['widths', self.pick('16', '16,16', '32,16', '8', '32,32,32,32,32,'
                                                   '32,32,32,32', '0', '16,,16', '')]) +
                    self.some(['state', state]))
        if r in (16, 17):
            fields = self.pick('16:0xc000:0:3:0x3', '16:0xc000:0:3:0x3/16:0:0:0:0',
                               '16:0:0:65535:65535', '16:65536:0:0:0', '8:1:0:255:0xff', 'x',
                               '1:2:3', '0:0:0:0:0')
            return (['profile', 'ev', 'set', self.an_id('ev')] +
                    self.some(['mode', self.pick('explicit', 'generated', 'auto', 'bogus')]) +
                    self.some(['fmt', self.an_id('fmt')]) + self.some(['count', number]) +
                    self.some(['min_active', number], 0.3) +
                    self.some(['event_mask', self.pick('good,assumed_bad,denied', 'none',
                                                        'good', 'red')], 0.3) +
                    self.some(['fields', fields]) + self.some(['state', state]))
        if r == 18:
            return ['profile', 'ev', 'replace', self.an_id('ev'), self.pick('0', '1', '2', '4096'),
                    value, port]
        if r == 19:
            return ['profile', 'ev', 'ev-state', self.an_id('ev'), value, port,
                    self.pick('good', 'denied', 'assumed_bad')]
        if r == 20:
            return (['profile', 'cc', 'set', self.an_id('cc')] +
                    self.some(['algorithm', self.pick('nscc', 'none', 'bogus')]) +
                    self.some(['link_gbps', self.pick('100', '0', '400', 'x'), 'base_rtt_us',
                               self.pick('10', '0', '1000000')]) +
                    self.some([self.pick('gamma=0.5', 'eta=1', 'colour=1', 'base_rtt_ns=',
                                         'max_cwnd_bytes=0', 'fi=-1', 'qa_gate=99')]) +
                    self.some(['state', state]))
        return [self.pick('frobnicate', 'profile', 'ev', 'port', 'dev', '')] + \
            self.some([self.pick('show', 'set', 'x', '--plane', '1')])

    def step(self):
        step = self.recipe() if self.rng.random() < 0.25 else None
        words, allowed = step if step else (self.command(), None)
        json_out = self.rng.random() < 0.7
        code, out, err = self.ctl.run(*words, json_out=json_out)
        self.codes[code] = self.codes.get(code, 0) + 1
        if code not in (0, EXIT_REFUSED, EXIT_USAGE, EXIT_UNANSWERED):
            self.fail(words, f'exit {code}: {err}')
        if code != 0 and not err.strip():
            self.fail(words, f'exit {code} without a message')
        errno = None
        if code == EXIT_REFUSED:
            m = re.match(r'smrcctl: (E[A-Z0-9]+): \S', err)
            if not m or m.group(1) not in ERRNOS:
                self.fail(words, f'refused without a documented errno: {err!r}')
            errno = m.group(1)
        reply = None
        if json_out and code in (0, EXIT_REFUSED, EXIT_UNANSWERED):
            try:
                reply = json.loads(out)
            except ValueError:
                self.fail(words, f'--json printed no JSON: {out!r}')
            if code == EXIT_REFUSED and (reply.get('ok') is not False or reply.get('errno') != errno):
                self.fail(words, f'--json reply {reply} for {errno}')
        elif code == 0 and not out.strip():
            self.fail(words, 'exit 0 and nothing printed')
        if allowed is not None:
            if code != 0 and errno not in allowed:
                self.fail(words, f'a well-formed step refused: exit {code}: {err}')
            self.stepped += code == 0
            if words[1] == 'fmt' and words[2] == 'set' and 'widths' in words:
                self.udp16.add(int(words[3]))
        elif words[:3] == ['profile', 'fmt', 'set'] and code == 0 and re.fullmatch(r'\d+', words[3]):
            self.udp16.discard(int(words[3]))  # maybe another mode or widths now
        self.follow(words, code, errno, reply)
        self.steps += 1
        self.give_back()

    def follow(self, words, code, errno, reply):
        """The model: profiles, and what must be undone afterwards."""
        if code == 0 and (words[:2] == ['ev', 'deny'] or words[:2] == ['port', 'set'] and
                          words[4] == 'down'):
            self.take(words[:4] + ['up'] if words[0] == 'port' else ['ev', 'restore'] + words[2:5])
        if words[0] != 'profile' or len(words) < 3 or code == EXIT_USAGE:
            return
        kind, verb = words[1], words[2]
        known = self.profiles.get(kind, {})
        pid = int(words[3]) if len(words) > 3 and re.fullmatch(r'\d+', words[3]) else None
        if verb == 'ev-state' and code == 0 and words[6] == 'denied':
            self.take(words[:6] + ['good'])
        if verb == 'show' and pid is not None:
            if (code == 0) != (pid in known):
                self.fail(words, f'exit {code}, {errno}; the model has {sorted(known)}')
            if reply is not None and code == 0 and (reply['id'], reply['state']) != (pid, known[pid]):
                self.fail(words, f'profile {reply["id"]} {reply["state"]}, the model {known[pid]}')
        elif verb == 'create':
            if code == 0:
                new = reply['id'] if reply is not None else pid or None  # 0: the lowest free
                if new is not None and new in known:
                    self.fail(words, f'created {new}, which exists')
                if new is not None:
                    known[new] = 'INIT'
                elif reply is None:  # no id and no JSON: learn it again
                    self.profiles[kind] = {p['id']: p['state']
                                           for p in self.ctl.ok('profile', kind, 'show')}
            elif pid and (errno == 'EEXIST') != (pid in known):
                self.fail(words, f'{errno}; the model has {sorted(known)}')
        elif verb == 'destroy' and pid is not None:
            if code == 0:
                if known.get(pid) not in ('INIT', 'OFFLINE') or pid in self.declared[kind]:
                    self.fail(words, f'destroyed, the model says {known.get(pid)}')
                del known[pid]
            elif errno == 'ENOENT' and pid in known:
                self.fail(words, 'ENOENT for a profile the model has')
        elif verb == 'set' and pid is not None:
            if pid in self.declared.get(kind, ()):
                if code == 0:
                    self.fail(words, 'a declared profile changed')
                return
            if code == 0:
                if pid not in known:
                    self.fail(words, 'set a profile the model does not have')
                if 'state' in words[4:]:
                    to = words[words.index('state', 4) + 1].upper()
                    if to != known[pid] and (known[pid], to) not in MOVES:
                        self.fail(words, f'{known[pid]} -> {to} is not a move')
                    known[pid] = to
                elif known[pid] == 'ONLINE' and len(words) > 4:
                    self.fail(words, 'an ONLINE profile changed')
            elif errno == 'ENOENT' and kind == 'fmt' and pid in known:
                self.fail(words, 'ENOENT for a format profile the model has')

    def take(self, give_back):
        self.taken.append((self.steps + self.rng.randrange(1, 4), give_back))

    def give_back(self, everything=False):
        due = [w for when, w in self.taken if everything or when <= self.steps]
        self.taken = [(when, w) for when, w in self.taken if not everything and when > self.steps]
        for words in due:
            code, _, err = self.ctl.run(*words)
            # A profile's EV may have gone with its profile in the meantime.
            if code != 0 and not (words[0] == 'profile' and 'ENOENT' in err):
                self.fail(words, f'giving back what the storm took: exit {code}: {err}')


def connect(ctl, sndbuf=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if sndbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.connect(ctl.sock)
    return s


def read_all(s, timeout=15):
    """Every reply line until the daemon closes, each parsed strictly."""
    s.settimeout(timeout)
    data = b''
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return [json.loads(line.decode('utf-8')) for line in data.splitlines()]


def rss_kib(pid):
    with open(f'/proc/{pid}/status') as f:
        return int(re.search(r'VmRSS:\s+(\d+)', f.read()).group(1))


def case_socket(args):
    d, ctl = start(args, 'socket', control_idle_ms=1500)
    try:
        # Sent all it will: every request is still answered, the last one
        # without a newline, and only then is the connection closed.
        for _ in range(20):
            s = connect(ctl)
            s.sendall(b'dev show\nstats a\nport show')
            s.shutdown(socket.SHUT_WR)
            r = read_all(s)
            check(len(r) == 3 and all(x['ok'] for x in r), f'half-closed client got {r}')
        stats = r[1]['result']
        check([t['name'] for t in stats['totals']] == ['a'] and
              [p['name'] for p in stats['ports']] == ['a/0', 'a/1'] and
              stats['ports'][0]['device'].startswith('net_ring'), f'stats a: {stats}')

        s = connect(ctl)
        s.sendall(b'dev show ' + b'x' * 5000 + b'\nstats\n')
        r = read_all(s)
        check(len(r) == 1 and r[0]['errno'] == 'EINVAL' and 'longer than 4096' in r[0]['error'],
              f'a 5 KB line: {r}')

        s = connect(ctl)
        s.sendall(b'ev show \xff\xc3 1\n')
        s.shutdown(socket.SHUT_WR)
        r = read_all(s)  # strict UTF-8
        check(len(r) == 1 and r[0]['errno'] == 'ENOENT' and '\ufffd\ufffd' in r[0]['error'],
              f'not UTF-8: {r}')

        # A client that sends without reading: held once its replies pile up.
        before = rss_kib(d.proc.pid)
        s = connect(ctl, sndbuf=16384)
        s.setblocking(False)
        sent = 0
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                sent += s.send(b'stats\n' * 64) // len(b'stats\n')
            except BlockingIOError:
                time.sleep(0.01)
        grown = rss_kib(d.proc.pid) - before
        served = ctl.ok('dev', 'show')  # meanwhile others are served
        check(served['endpoints'] == ['a', 'b'], f'dev show: {served}')
        check(grown < 64 * 1024, f'softmrcd grew by {grown} KiB for a client not reading')
        check(ctl.ok('stats')['control']['output_stalls'] > 0, 'output_stalls not counted')
        s.setblocking(True)
        s.shutdown(socket.SHUT_WR)
        r = read_all(s, timeout=60)
        check(len(r) == sent and all(x['ok'] and 'totals' in x['result'] for x in r),
              f'{len(r)} replies to {sent} requests')

        # Idle for control_idle_ms: closed, with a line saying so; a
        # follower is never idle.
        follower = connect(ctl)
        follower.sendall(b'events follow\n')
        follower.settimeout(5)
        check(json.loads(follower.recv(4096).splitlines()[0])['result'] == {'following': True},
              'events follow')
        for part in (b'', b'dev sh'):  # part of a line is no request either
            s = connect(ctl)
            s.sendall(part)
            r = read_all(s, timeout=10)
            check(len(r) == 1 and r[0]['errno'] == 'EBUSY' and
                  'closed after 1500 ms without a request' in r[0]['error'], f'idle: {r}')
        follower.setblocking(False)
        try:
            check(follower.recv(65536) != b'', 'the follower was closed')
        except BlockingIOError:
            pass  # open, nothing to read
        follower.close()
        check(ctl.ok('stats')['control']['idle_closed'] >= 1, 'idle_closed not counted')

        # At the fd limit: told why, not left waiting in the backlog.
        fds = len(os.listdir(f'/proc/{d.proc.pid}/fd'))
        limit = fds + 4
        soft = os.sysconf('SC_OPEN_MAX')  # this process's, which softmrcd inherited
        subprocess.run(['prlimit', f'--pid={d.proc.pid}', f'--nofile={limit}:'], check=True)
        held, refused = [], None
        for _ in range(12):
            c = connect(ctl)
            try:
                c.sendall(b'dev show\n')
            except BrokenPipeError:
                pass  # refused before the request arrived: the reply is there
            c.settimeout(10)
            line = json.loads(c.recv(4096).splitlines()[0])
            if not line['ok']:
                refused = line
                break
            held.append(c)
        check(refused is not None and refused['errno'] == 'EBUSY' and
              'out of file descriptors' in refused['error'], f'at {limit} fds: {refused}')
        for c in held:
            c.close()
        subprocess.run(['prlimit', f'--pid={d.proc.pid}', f'--nofile={soft}:'], check=True)
        check(ctl.ok('stats')['control']['refused_no_fd'] >= 1, 'refused_no_fd not counted')
        d.read_until(r'control: out of file descriptors')
        stop(d)
    finally:
        d.kill()


def case_storm(args):
    seed = int(os.environ.get('SMRC_CTL_SEED', '1'))
    rounds = int(os.environ.get('SMRC_CTL_ROUNDS', '1500'))
    d, ctl = start(args, 'storm')
    try:
        storm = Storm(ctl, seed)
        for _ in range(rounds):
            storm.step()
        check(d.proc.poll() is None, 'softmrcd died', d.output())
        storm.give_back(everything=True)
        before = ctl.ok('stats')['totals'][1]['txgen_verified']
        wait_for('traffic after the storm',
                 lambda: ctl.ok('stats')['totals'][1]['txgen_verified'] > before, timeout=20,
                 output=json.dumps(ctl.ok('stats'), indent=1))
        # Nothing it took was gone long enough to fail a QP (4 s of retries).
        totals = ctl.ok('stats')['totals']
        check(all(t['txgen_errors'] == 0 and t['txgen_mismatches'] == 0 for t in totals),
              f'QPs failed or data went wrong: {totals}')
        made = [st for k in KINDS for i, st in storm.profiles[k].items()
                if i not in storm.declared[k]]
        print(f'seed {seed}: {rounds} commands, {storm.stepped} of them well-formed profile '
              f'steps, exits {dict(sorted(storm.codes.items()))}; profiles made and left: ' +
              ', '.join(f'{made.count(st)} {st}' for st in ('INIT', 'OFFLINE', 'ONLINE')))
        stop(d)
    finally:
        d.kill()


class FakeDaemon:
    """A control socket that is not softmrcd: it reads each connection's
    request (kept in .requests) and answers with `reply` (bytes); with
    `hold`, it keeps the connection open afterwards, as a stopped daemon
    would."""

    def __init__(self, path, reply, hold=False):
        if os.path.exists(path):
            os.unlink(path)
        self.reply = reply
        self.hold = hold
        self.held = []
        self.requests = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            self.requests.append(c.recv(4096).decode())
            c.sendall(self.reply)
            if self.hold:
                self.held.append(c)
            else:
                c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.listener.close()
        for c in self.held:
            c.close()


def timed(cmd, interrupt_after=None):
    """Runs cmd (sending SIGINT after `interrupt_after` s): exit status,
    stdout, stderr and the seconds it took."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, out, err, time.monotonic() - t0


def case_client(args):
    path = os.path.join(args.workdir, 'fake.sock')
    ctl = Ctl(args, path)
    # Replies a daemon of another protocol (or a broken one) might send: each
    # refused with why; {"ok":true} alone used to crash smrcctl, {"ok":1} to
    # pass as a refusal with no errno.
    for reply, why in ((b'{"ok":true}', '"ok": true without a "result"'),
                       (b'{"ok":1,"result":{}}', 'no "ok": true or false'),
                       (b'{"ok":false}', 'a refusal without "errno" and "error"'),
                       (b'{"ok":false,"errno":1,"error":"x"}',
                        'a refusal without "errno" and "error"'),
                       (b'[true]', 'no "ok": true or false'),
                       (b'{"ok":', 'at byte 6: ')):
        with FakeDaemon(path, reply + b'\n'):
            for json_out in (True, False):
                code, out, err = ctl.run('dev', 'show', json_out=json_out)
                want = f"smrcctl: softmrcd sent a reply that is not the protocol's: {why}"
                check(code == EXIT_NO_DAEMON and err.startswith(want) and out == '',
                      f'{reply}: exit {code}, stdout {out!r}, stderr {err!r}, want {want!r}')
    with FakeDaemon(path, b'{"ok":true,"result":{"ports":2}}\n') as f:
        code, out, err = ctl.run('dev', 'show', json_out=False)
        check(code == 0 and out == 'ports: 2\n' and f.requests == ['dev show\n'],
              f'exit {code}, stdout {out!r}, stderr {err!r}, requests {f.requests}')
    print('replies outside the protocol refused with exit 3')

    # Options smrcctl reads itself: refused (exit 2) before anything is sent.
    with FakeDaemon(path, b'{"ok":true,"result":[]}\n') as f:
        for words, message in (
                (['--socket'], '--socket needs a value'),
                (['--prefix'], '--prefix needs a value'),
                # An empty --socket used to be the default socket.
                (['--socket', '', 'dev', 'show'], '--socket: empty value'),
                (['--prefix', '', 'dev', 'show'], '--prefix: empty value'),
                (['--socket', path, 'events', '--count', '5'], '--count is for events --follow'),
                (['--socket', path, 'events', '--follow', '--count'], '--count needs a value'),
                (['--socket', path, 'events', '--follow', '--count', '0'], None),
                (['--socket', path, 'events', '--follow', '--count', '-1'], None),
                (['--socket', path, 'events', '--follow', '--count', str(2**64)], None),
                (['--socket', path, 'events', '--follow', '--count', '5x'], None)):
            message = message or f"--count: '{words[-1]}' is not an integer in 1..{2**64 - 1}"
            r = subprocess.run([args.smrcctl] + words, capture_output=True, text=True, timeout=10,
                               check=False)
            check(r.returncode == EXIT_USAGE and r.stderr.startswith(f'smrcctl: {message}\n'),
                  f'{words}: exit {r.returncode}, stderr {r.stderr!r}, want {message!r}')
        check(f.requests == [], f'sent {f.requests}')
    event = b'{"event":{"t_ns":1000000000,"endpoint":"a","qpn":1,"ev":%d,"state":"GOOD"}}\n'
    with FakeDaemon(path, b'{"ok":true,"result":{"following":true}}\n' +
                    b''.join(event % i for i in range(3))) as f:
        code, out, err = ctl.run('events', '--follow', '--count', '2')
        check(code == 0 and [json.loads(x)['ev'] for x in out.splitlines()] == [0, 1] and
              f.requests == ['events follow\n'], f'exit {code}, stdout {out!r}, stderr {err!r}')
    # An endpoint named "follow" is no events --follow.
    with FakeDaemon(path, b'{"ok":true,"result":{"endpoint":"follow"}}\n') as f:
        code, out, err = ctl.run('stats', 'follow', json_out=False)
        check(code == 0 and out == 'endpoint: follow\n', f'exit {code}, {out!r}, {err!r}')
    print('smrcctl\'s own options checked before sending')

    # Ends of the connection that are not the protocol's, each said (exit 3).
    with FakeDaemon(path, b'{"ok":true,"res'):
        code, out, err = ctl.run('dev', 'show')
        want = f'smrcctl: {path}: softmrcd closed the connection mid-reply, after 15 bytes\n'
        check(code == EXIT_NO_DAEMON and err == want and out == '',
              f'mid-reply: exit {code}, stdout {out!r}, stderr {err!r}, want {want!r}')
    with FakeDaemon(path, b''):
        code, out, err = ctl.run('dev', 'show')
        want = f'smrcctl: {path}: softmrcd closed the connection without a reply\n'
        check(code == EXIT_NO_DAEMON and err == want,
              f'no reply: exit {code}, stderr {err!r}, want {want!r}')
    # Following, a daemon that goes away used to end smrcctl with 3, unsaid.
    with FakeDaemon(path, b'{"ok":true,"result":{"following":true}}\n' + event % 0):
        code, out, err = ctl.run('events', '--follow')
        want = (f'smrcctl: following EV events of {path}\n'
                f'smrcctl: {path}: softmrcd closed the connection\n')
        check(code == EXIT_NO_DAEMON and err == want and json.loads(out)['ev'] == 0,
              f'following: exit {code}, stdout {out!r}, stderr {err!r}, want {want!r}')
    # A path that is no socket used to be "Connection refused (is softmrcd running?)".
    os.unlink(path)
    plain = os.path.join(args.workdir, 'plain')
    open(plain, 'w').close()
    for not_socket in (plain, args.workdir):
        code, _, err = Ctl(args, not_socket).run('dev', 'show')
        want = f'smrcctl: cannot connect to {not_socket}: not a socket (see --socket)\n'
        check(code == EXIT_NO_DAEMON and err == want,
              f'{not_socket}: exit {code}, stderr {err!r}, want {want!r}')
    code, _, err = Ctl(args, path).run('dev', 'show')
    want = (f'smrcctl: cannot connect to {path}: No such file or directory (is softmrcd running? '
            'see --socket)\n')
    check(code == EXIT_NO_DAEMON and err == want, f'no socket: exit {code}, {err!r}')
    print('a reply cut short, a daemon gone while following, a path that is no socket: exit 3, said')

    # Following into a reader that went away (| head -1) ends at the next
    # event, by SIGPIPE as other programs end; it used to follow on, unread.
    with FakeDaemon(path, b'{"ok":true,"result":{"following":true}}\n' + event % 0,
                    hold=True) as f:
        proc = subprocess.Popen([args.smrcctl, '--socket', path, '--json', 'events', '--follow'],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            first = proc.stdout.readline()
            proc.stdout.close()
            wait_for('the fake daemon to hold the connection', lambda: f.held, timeout=5)
            f.held[0].sendall(event % 1)
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = 'still following after 5 s'
        finally:
            proc.kill()
            proc.wait()
    check(json.loads(first)['ev'] == 0 and code == -signal.SIGPIPE,
          f'| head -1: first {first!r}, exit {code}')
    print('following into a closed pipe ends at the next event')

    # A daemon that takes the request and never replies (SIGSTOPped, say).
    base = [args.smrcctl, '--socket', path]
    with FakeDaemon(path, b'', hold=True):
        for opts, ms in ((['--reply-timeout-ms', '300'], 300), ([], 10000)):
            code, _, err, took = timed(base + opts + ['dev', 'show'])
            want = f'smrcctl: {path}: softmrcd sent no reply within {ms} ms'
            check(code == EXIT_NO_REPLY and err.startswith(want) and 0 <= took - ms / 1e3 < 5,
                  f'{opts}: exit {code} after {took:.1f} s, stderr {err!r}, want {want!r}')
        # Interrupted, it ends as SIGINT does and claims nothing of the daemon.
        code, out, err, _ = timed(base + ['dev', 'show'], interrupt_after=0.5)
        check(code == -signal.SIGINT and out == err == '', f'SIGINT: exit {code}, {out!r} {err!r}')
    code, _, err, _ = timed(base + ['--reply-timeout-ms', '0', 'dev', 'show'])
    check(code == EXIT_USAGE and "--reply-timeout-ms: '0' is not an integer in 1..3600000" in err,
          f'exit {code}, {err!r}')
    # A daemon that takes no connection: its backlog full, connect() waits.
    os.unlink(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(0)
        queued = []
        while True:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(path)
            except BlockingIOError:
                c.close()
                break
            queued.append(c)
        code, _, err, took = timed(base + ['--reply-timeout-ms', '300', 'dev', 'show'])
        for c in queued:
            c.close()
    want = f'smrcctl: {path}: softmrcd did not take the connection within 300 ms'
    check(code == EXIT_NO_REPLY and err.startswith(want) and took < 5,
          f'full backlog: exit {code} after {took:.1f} s, stderr {err!r}, want {want!r}')
    # Following waits for events however far apart; SIGINT ends it with 0.
    with FakeDaemon(path, b'{"ok":true,"result":{"following":true}}\n', hold=True):
        code, _, err, _ = timed(base + ['--reply-timeout-ms', '300', 'events', '--follow'],
                                interrupt_after=1.5)
        check(code == 0 and err == f'smrcctl: following EV events of {path}\n',
              f'following: exit {code}, stderr {err!r}')
    print('no reply, no connection: exit 6 in --reply-timeout-ms; SIGINT ends a wait quietly')


if __name__ == '__main__':
    sys.exit(test_main(globals(), __doc__, 'smrcctl'))
