#!/usr/bin/env python3
"""The application API end to end: softmrcd processes over net_memif, and
programs written against libsoftmrc. One --case per test:

  doc_matches_example  docs/api.md quotes docs/examples/wimm_exchange.c verbatim
  installed_example    the library installed (meson install --destdir): every
                       docs/examples/*.c compiles and links against it with
                       pkg-config's flags, and wimm_exchange so built runs on
                       it between the daemons
  example              that program, receiver on daemon a, sender on daemon b:
                       a Write-with-Immediate, every byte checked
  misuse               every misuse path returns its documented error
  free_in_flight       a region freed under a Write from it: the Write the
                       daemon's engine had completes and its bytes arrive,
                       then the first it had not gets LOC_PROT_ERR and takes
                       the QP to ERR, the rest flushed
  foreign_rkey         a peer names another application's rkey and address:
                       REM_ACCESS_ERR, that memory untouched
  pd_isolation         two PDs in one application: a peer naming the rkey of
                       the PD its QP is not in gets REM_ACCESS_ERR, a QP of
                       the other PD posting from that region LOC_PROT_ERR;
                       the region untouched, the PD busy while it holds it
  forged_descriptors   a raw client writes bad descriptors and a garbage index
                       straight into its ring: error completions that take
                       the QP to ERR, a QP-fatal event, each counted in /softmrc/drops, the daemon
                       keeps serving
  port_events          smrcctl takes a plane down and up: the application gets
                       PORT_ERR and PORT_ACTIVE for it
  app_killed           an application streaming Writes is SIGKILLed: its daemon
                       frees what it had, the peer's QP fails at once (a
                       receiver in RTS or in RTR, then a sender whose
                       receiver is killed), and both serve the example
  daemon_killed        the daemon is SIGKILLed under a blocked application:
                       every call fails with ENOTCONN, nothing hangs; the
                       socket files it left (application, controller,
                       memif servers) are replaced by a new pair, which
                       runs the example
  daemon_stopped       the daemon is stopped (SIGSTOP) under an application
                       with a reply timeout of 1 s: its next slow-path call
                       fails with ETIMEDOUT after 1-6 s, then every call as
                       if the daemon were gone, and a new open times out
                       too; continued, the daemon frees what the
                       application had and runs the example
  server_restarts      daemon a, every plane's memif server, stops (SIGTERM)
                       and starts again, twice: b's memif clients reconnect
                       by themselves (/softmrc/ports reconnects), every
                       plane of b is in use again and the example runs;
                       then b starts before a and waits for it
  profiles             an application QP on a profile made with smrcctl: ids
                       refused while it is not ONLINE, the QP's EVs are the
                       profile's, the profile cannot go OFFLINE while used
                       (EBUSY), a profile EV denied reaches the QP (events
                       name it), and it is detached when the application goes
  init_again           INIT -> INIT, as rdma_cm does before RTR: refused
                       moves (a field of RTR, an unknown or OFFLINE
                       profile) keep the QP on its profiles, attached
                       (EBUSY); moves to smrcctl's other profiles, the CC
                       one then the EV one, show in query_qp, the old ones
                       may go OFFLINE and the new not (EBUSY), the QP's
                       EVs (and their states) and window are the new
                       profiles'; it connects, a Write completes, and a
                       receive posted before the moves takes the peer's
                       immediate
  reports              an application QP in telemetry and smrcctl (owner,
                       counters that grow), the traffic generator's marked
  sigterm_flush        SIGTERM under a stream: the QP's outstanding work
                       completes with FLUSH_ERR, then ENOTCONN
  stop_together        both daemons SIGTERMed at once, 20 times: both exit 0
                       every time (memif's disconnect, handled on DPDK's
                       interrupt thread, once raced the peer's own close)
  stop_one_side        one daemon SIGTERMed, a then b, 10 times each: the
                       other hears its farewell (plane down, "peer
                       closing"), goes on, and both exit 0
  channel_budget       daemon a with a descriptor limit of 700: an
                       application's channels on three connections take
                       what it leaves the channels (124), then ENOMEM; the
                       controller still answers, another application gets
                       none; they come back when it dies, and when it
                       destroys them; the example runs afterwards
  app_permission       app_group: adm on both daemons: their sockets are
                       0660 root:adm, the example runs as nobody in adm,
                       nobody outside adm cannot connect (EACCES), nor
                       after the socket's mode was opened up (the daemon
                       checks the peer: EACCES, logged); another daemon
                       cannot take a's socket
  connection_limits    64 connections to daemon a that never say hello:
                       an application waits behind them until the daemon
                       closes each after 5 s (logged, with the pid), then
                       opens the 256 contexts a daemon serves and is refused
                       the next (EBUSY), as is another application; when it
                       lets go, the example runs
  protocol_storm       a hostile raw client sends thousands of random,
                       mostly near-valid requests, descriptors and ring
                       scribbles (protocol_storm.cc) beside a well-behaved
                       application: every reply as the protocol says, the
                       bystander untouched, the daemon serves the example
                       afterwards and exits 0. Seed 1 with payloads
                       copied, seed 2 with tx_payload: extbuf (sent in
                       place); SMRC_STORM_SEED replaces both seeds,
                       SMRC_STORM_ROUNDS the 5000 steps

Exit 0 on success, 1 with the reason and the daemons' output otherwise.
"""

import argparse
import glob
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'dpdk'))
from softmrcd_test import (EAL, Daemon, Failure, Telemetry, check,  # noqa: E402
                           telemetry_socket, test_main, wait_for)
from two_process_test import endpoint_and_peer  # noqa: E402

PLANES = 2
PATH_MTU = 1024  # memif frames are at most 1518 bytes
LCORES = {'a': '0@1,1@0', 'b': '0@0,1@1'}


def config(args, me, qp=None, extra=None, ports=None, srv6=False):
    """Endpoint `me`, the other a peer; by default a is every plane's memif
    server and b its client, or else on `ports`; SRv6 mode if `srv6`."""
    role = 'server' if me == 'a' else 'client'
    ports = ports or [f'net_memif{p},role={role},id=0,socket={sock(args, f"memif-p{p}")},'
                      'socket-abstract=no' for p in range(PLANES)]
    return {
        'path_mtu': PATH_MTU,
        'stats': {'snapshot_ms': 50, 'log_interval_ms': 0},
        # Small ACK timeout and retries: a peer QP that went away errors soon.
        'qp': qp if qp is not None else {'timeout': 12, 'retry_linear': 2, 'retry_exp': 2},
        **endpoint_and_peer(me, ports, srv6, app_socket=sock(args, f'app-{me}')),
        'control_socket': sock(args, f'ctl-{me}'),
        **(extra or {}),
    }


def sock(args, name):
    return os.path.join(args.workdir, name + '.sock')


def start_daemon(args, me, qp=None, extra=None, ports=None, srv6=False, nofile=None, eal=EAL):
    d = Daemon(args, f'api_{args.case}_{me}', config(args, me, qp, extra, ports, srv6), eal=eal)
    i = d.cmd.index('-l')
    d.cmd[i:i + 2] = ['--lcores', LCORES[me]]
    if nofile is not None:  # its descriptor limit, soft and hard
        d.cmd[:0] = ['prlimit', f'--nofile={nofile}', '--']
    d.start()
    d.read_until(r'applications connect to', timeout=15)
    # The control socket opens after the applications' (smrcctl's cases).
    d.read_until(r'softmrcd: control socket', timeout=15)
    return d


def start_pair(args, qp=None, extra=None, nofile_a=None, eal=EAL):
    for p in range(PLANES):
        path = sock(args, f'memif-p{p}')
        if os.path.exists(path):
            os.unlink(path)
    a = start_daemon(args, 'a', qp, extra, nofile=nofile_a, eal=eal)
    try:
        # Server first: a memif client started first would wait for it
        # (reconnecting at growing intervals), and the test with it.
        deadline = time.monotonic() + 10
        while not all(os.path.exists(sock(args, f'memif-p{p}')) for p in range(PLANES)):
            check(time.monotonic() < deadline, 'no memif server sockets' + outputs(a))
            a._read(0.05)
        return a, start_daemon(args, 'b', qp, extra, eal=eal)
    except Failure:
        stop(a)
        raise


def wait_planes_in_use(d, me):
    """Until memif has brought up every plane of daemon d (endpoint `me`):
    only then can a plane go down, or an application's first Writes find
    every plane."""
    t = Telemetry(telemetry_socket(d.prefix))
    wait_for(f'every plane of {me} in use', lambda: all(
        r['in_use'] == 1 for r in t.query(f'/softmrc/planes,{me}').values()), timeout=10)


def stop(*daemons):
    """SIGTERM to each daemon still running, then waits for it; one still
    there 10 s later is killed (check_exits() reports it)."""
    for d in daemons:
        if d and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGTERM)
    for d in daemons:
        if d:
            try:
                d.wait(10)
            except Failure:
                d.proc.wait()


def check_exits(*daemons):
    """Every daemon a case did not kill on purpose (Daemon.kill()) exited 0
    by itself: a crash, a sanitizer's report at shutdown or a hang on
    SIGTERM fails the case even when everything before went well."""
    bad = [f'{d.prefix} {"did not exit on SIGTERM" if d.hung else "exited"} {d.proc.returncode}'
           for d in daemons if d and not d.killed and (d.hung or d.proc.returncode != 0)]
    check(not bad, ', '.join(bad) + outputs(*daemons))


def outputs(*daemons):
    return ''.join(f'\n--- {d.prefix} ---\n' + d.output() for d in daemons if d)


class App:
    """A program whose stdout lines we read and whose stdin we write."""

    started = []  # every App, for kill_all()

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        App.started.append(self)
        self.lines = []
        self.pending = b''

    def read_line(self, pattern, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if re.search(pattern, line):
                    self.lines.remove(line)
                    return line
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f'no line matching {pattern!r} from {self.proc.args}: '
                              f'{self.lines!r}')
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise Failure(f'{self.proc.args} ended: {self.lines!r} '
                                  f'{self.pending!r}')
                *done, self.pending = (self.pending + chunk).split(b'\n')
                self.lines += [l.decode(errors='replace') for l in done]

    @staticmethod
    def kill_all():
        """Kills the programs still running (a case that failed half way),
        so none outlives the test."""
        for app in App.started:
            if app.proc.poll() is None:
                app.proc.kill()
                app.proc.wait()
        App.started.clear()

    def send(self, line):
        self.proc.stdin.write((line + '\n').encode())
        self.proc.stdin.flush()

    def finish(self, timeout=20):
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise Failure(f'{self.proc.args} did not finish: ' + out.decode(errors='replace'))
        text = '\n'.join(self.lines) + '\n' + (self.pending + out).decode(errors='replace')
        return self.proc.returncode, text


def no_line(app, pattern, seconds):
    """Whether `app` prints no line matching `pattern` within `seconds`."""
    try:
        app.read_line(pattern, timeout=seconds)
    except Failure:
        return True
    return False


def connect(x, y):
    """Cross the two programs' exchange lines; x's QPN."""
    lx = x.read_line(r'^\d+ \d+ \d+ \d+( \d+){16}$')
    ly = y.read_line(r'^\d+ \d+ \d+ \d+( \d+){16}$')
    x.send(ly)
    y.send(lx)
    return int(lx.split()[0])


NOBODY = ['setpriv', '--reuid=nobody', '--regid=nogroup']


def run_example(args, a, b, user=()):
    """The example between the daemons; `user`: setpriv's options to run
    both sides as nobody."""
    runs_as = NOBODY + list(user) if user else []
    rx = App(runs_as + [args.example, 'receiver', sock(args, 'app-a')])
    tx = App(runs_as + [args.example, 'sender', sock(args, 'app-b')])
    connect(rx, tx)
    code_tx, out_tx = tx.finish()
    code_rx, out_rx = rx.finish()
    check(code_rx == 0 and 'receiver: ok' in out_rx, f'receiver {code_rx}: {out_rx}')
    check(code_tx == 0 and 'sender: ok' in out_tx, f'sender {code_tx}: {out_tx}')
    print('example: receiver and sender ok')


def run_checks(args, mode, socket_name, peer):
    r = subprocess.run([args.helper, mode, sock(args, socket_name), peer], capture_output=True,
                       text=True, timeout=30, check=False)
    print(r.stdout, end='')
    check(r.returncode == 0 and 'FAIL' not in r.stdout,
          f'{mode} exit {r.returncode}\n{r.stdout}{r.stderr}')
    return r.stdout.count('ok: ')


def case_doc_matches_example(args):
    with open(os.path.join(args.docs, 'examples', 'wimm_exchange.c')) as f:
        source = f.read()
    with open(os.path.join(args.docs, 'api.md')) as f:
        doc = f.read()
    m = re.search(r'```c\n(/\* A complete Write-with-Immediate exchange.*?)```', doc, re.S)
    check(m is not None, 'docs/api.md has no ```c block with the example')
    check(m.group(1) == source, 'the example in docs/api.md differs from '
          'docs/examples/wimm_exchange.c')
    print('docs/api.md quotes docs/examples/wimm_exchange.c verbatim')


def with_pair(args, body, extra=None, nofile_a=None):
    a = b = None
    try:
        a, b = start_pair(args, extra=extra, nofile_a=nofile_a)
        body(a, b)
    except Failure as e:
        stop(a, b)
        raise Failure(str(e) + outputs(a, b)) from None
    except BaseException:  # a bug in the case: no daemon outlives it
        stop(a, b)
        raise
    finally:
        App.kill_all()
    stop(a, b)
    check_exits(a, b)


def case_example(args):
    def body(a, b):
        for me in ('a', 'b'):  # root's alone by default
            st = os.stat(sock(args, f'app-{me}'))
            check(st.st_mode & 0o777 == 0o660 and st.st_uid == 0 and st.st_gid == 0,
                  f'app-{me}.sock: mode {st.st_mode & 0o777:o}, owner {st.st_uid}:{st.st_gid}')
        run_example(args, a, b)
    with_pair(args, body)


def contexts_as_nobody(args, groups):
    """What `api_helper contexts` on daemon a says, run as nobody with
    setpriv's `groups` option."""
    app = App(NOBODY + [groups, args.helper, 'contexts', sock(args, 'app-a')])
    line = app.read_line(r'^contexts: ')
    code, out = app.finish()
    check(code == 0, f'contexts as nobody: exit {code}: {out}')
    return line


def case_app_permission(args):
    def body(a, b):
        for me, d in (('a', a), ('b', b)):
            st = os.stat(sock(args, f'app-{me}'))
            check(st.st_mode & 0o777 == 0o660 and st.st_uid == 0 and st.st_gid == 4,
                  f'app-{me}.sock: mode {st.st_mode & 0o777:o}, owner {st.st_uid}:{st.st_gid}')
            check(any(l.endswith(f'applications connect to {sock(args, "app-" + me)} '
                                 '(root and group adm)') for l in d.lines),
                  f'no line saying who may connect to daemon {me}')
        run_example(args, a, b, user=['--groups=adm'])
        line = contexts_as_nobody(args, '--clear-groups')
        check(line == 'contexts: 0 open, then EACCES', f'nobody outside adm: {line}')
        # A mistake: the socket opened to all. The daemon still checks who
        # connects, and says why.
        os.chmod(sock(args, 'app-a'), 0o666)
        line = contexts_as_nobody(args, '--clear-groups')
        check(line == 'contexts: 0 open, then EACCES', f'nobody, socket 0666: {line}')
        a.read_until(r"softmrcd: a: refused an application: uid 65534 \(pid \d+\) is not root "
                     r"and not in group 'adm'")
        check(ctl(args, 'a', 'stats')['applications']['refused'] == 1, 'refusal not counted')
        line = contexts_as_nobody(args, '--groups=adm')
        check(line == 'contexts: 256 open, then EBUSY', f'nobody in adm: {line}')
        # Another daemon on a's socket: refused, the socket left to a.
        other = Daemon(args, f'api_{args.case}_c', config(
            args, 'a', ports=[f'net_null{p}' for p in range(PLANES)],
            extra={'control_socket': 'none'}))
        code, _, err = other.run(timeout=30)
        want = f"endpoints[0].app_socket: '{sock(args, 'app-a')}' is in use by another process"
        check(code == 2 and err.strip().endswith(want), f'a second daemon: exit {code}: {err}')
        run_example(args, a, b, user=['--groups=adm'])
    with_pair(args, body, extra={'app_group': 'adm'})


def case_misuse(args):
    def body(a, b):
        n = run_checks(args, 'misuse', 'app-a', 'fd00:0:0:0::b')
        check(n >= 120, f'only {n} checks ran')
    # Tables small enough for the helper to fill.
    with_pair(args, body, extra={'limits': {'max_qps': 6, 'max_regions': 6}})


def case_free_in_flight(args):
    def body(a, b):
        tx = App([args.helper, 'free_in_flight', sock(args, 'app-a'), 'writer'])
        rx = App([args.helper, 'free_in_flight', sock(args, 'app-b'), 'target'])
        connect(tx, rx)
        code_tx, out_tx = tx.finish(timeout=50)
        print(out_tx, end='')
        check(code_tx == 0 and 'FAIL' not in out_tx and 'written' in out_tx,
              f'writer {code_tx}: {out_tx}')
        rx.send('check')
        code_rx, out_rx = rx.finish(timeout=20)
        print(out_rx, end='')
        check(code_rx == 0 and 'FAIL' not in out_rx and 'ok: every byte' in out_rx,
              f'target {code_rx}: {out_rx}')
        # Neither daemon minds: both serve the example afterwards.
        run_example(args, a, b)
    with_pair(args, body)


def case_installed_example(args):
    env = os.environ
    dest = os.path.join(args.workdir, 'dest')
    r = subprocess.run([env['SOFTMRC_MESON'], 'install', '-C', env['SOFTMRC_BUILD_ROOT'],
                        '--no-rebuild', '--quiet', '--destdir', dest],
                       capture_output=True, text=True, timeout=120, check=False)
    check(r.returncode == 0, f'meson install: exit {r.returncode}\n{r.stdout}{r.stderr}')
    pcs = glob.glob(os.path.join(dest, '**', 'pkgconfig', 'softmrc.pc'), recursive=True)
    check(len(pcs) == 1, f'installed softmrc.pc: {pcs}')
    # The installed .pc names the final prefix; the sysroot puts it in dest.
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.dirname(pcs[0]), PKG_CONFIG_SYSROOT_DIR=dest)
    r = subprocess.run([env['SOFTMRC_PKG_CONFIG'], '--cflags', '--libs', 'softmrc'], env=pc_env,
                       capture_output=True, text=True, timeout=10, check=False)
    check(r.returncode == 0, f'pkg-config softmrc: {r.stderr}')
    flags = r.stdout.split()
    check(f'-I{dest}/' in r.stdout and f'-L{dest}/' in r.stdout and '-lsoftmrc' in flags,
          f'pkg-config softmrc: {r.stdout}')
    libdir = next(f[2:] for f in flags if f.startswith('-L'))
    check(os.path.exists(os.path.join(libdir, 'libsoftmrc.so.1')),
          f'no libsoftmrc.so.1 in {libdir}')
    sources = sorted(glob.glob(os.path.join(args.docs, 'examples', '*.c')))
    check(sources, 'no docs/examples/*.c')
    # A library built with sanitizers needs a program built with them.
    sanitize = [] if env['SOFTMRC_SANITIZE'] == 'none' else ['-fsanitize=' + env['SOFTMRC_SANITIZE']]
    for src in sources:
        out = os.path.join(args.workdir, os.path.basename(src)[:-2])
        r = subprocess.run([env['SOFTMRC_CC'], '-std=c11', '-D_DEFAULT_SOURCE', '-Wall', '-Wextra',
                            '-Werror', *sanitize, '-o', out, src] + flags,
                           capture_output=True, text=True, timeout=60, check=False)
        check(r.returncode == 0, f'{src} against the installed library:\n{r.stderr}')
        print(f'ok: {os.path.basename(src)} builds against the installed header and library')
    # The installed wimm_exchange runs on the installed library.
    installed = argparse.Namespace(**vars(args))
    installed.example = os.path.join(args.workdir, 'wimm_exchange')
    os.environ['LD_LIBRARY_PATH'] = libdir
    r = subprocess.run(['ldd', installed.example], capture_output=True, text=True, timeout=10,
                       check=False)
    check(f'libsoftmrc.so.1 => {libdir}/libsoftmrc.so.1' in r.stdout, f'ldd: {r.stdout}')
    with_pair(args, lambda a, b: run_example(installed, a, b))


def case_forged_descriptors(args):
    def body(a, b):
        t = Telemetry(telemetry_socket(a.prefix))

        def bad():
            return t.query('/softmrc/drops,a')['a']['app_bad_descriptors']
        check(bad() == 0, f'app_bad_descriptors {bad()} before any was forged')
        n = run_checks(args, 'forge', 'app-a', 'fd00:0:0:0::b')
        check(n >= 30, f'only {n} checks ran')
        # Four forged sends, a receive and a Write in each other's ring, and
        # the garbage producer index.
        wait_for('the refused descriptors in /softmrc/drops', lambda: bad() == 7,
                 output=f'app_bad_descriptors {bad()}, want 7')
        # The daemon still serves a well-behaved pair afterwards.
        run_example(args, a, b)
    with_pair(args, body)


def hog(args, contexts):
    """An application holding as many completion channels as daemon a gives
    it on `contexts` connections; the number."""
    app = App([args.helper, 'hog', sock(args, 'app-a'), str(contexts)])
    for i in range(contexts):
        line = app.read_line(rf'^hog: context {i}: ')
        check(line.endswith('then ENOMEM'), f'refused with another errno: {line}')
    return app, int(app.read_line(r'^hog: holding \d+ channels').split()[2])


def case_channel_budget(args):
    def body(a, b):
        m = [re.search(r'applications: at most 256 at once \(and 64 connecting\), (\d+) '
                       r'completion channels in all \(descriptor limit 700\)', line)
             for line in a.lines]
        m = [x for x in m if x]
        check(m, 'no line with the channels the descriptor limit leaves')
        budget = int(m[0].group(1))
        check(budget == 700 - 256 - 64 - 256, f'budget {budget}')
        # One application on three connections takes them all; the
        # controller's socket still accepts, another application gets none.
        first, held = hog(args, 3)
        check(held == budget, f'held {held} of {budget}')
        check(ctl(args, 'a', 'stats')['totals'], 'smrcctl stats while the channels are held')
        second, held = hog(args, 1)
        check(held == 0, f'another application got {held}')
        code, out = second.finish()  # its standard input closed: it lets go
        check(code == 0, f'second hog: {code} {out}')
        # Given back when an application dies, and when it destroys them.
        first.proc.kill()
        first.proc.wait()
        for _ in range(3):
            a.read_until(r'application \d+ went away')
        for _ in range(2):
            third, held = hog(args, 1)
            check(held == budget, f'after the first went: {held} of {budget}')
            code, out = third.finish()
            check(code == 0, f'third hog: {code} {out}')
        run_example(args, a, b)
    with_pair(args, body, nofile_a=700)


def case_connection_limits(args):
    def body(a, b):
        idle = []
        for _ in range(64):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(sock(args, 'app-a'))
            idle.append(s)
        first = App([args.helper, 'contexts', sock(args, 'app-a')])
        # Behind 64 silent connections it gets no answer, however long...
        ready, _, _ = select.select([first.proc.stdout], [], [], 2)
        check(not ready, 'an application was served while 64 connections awaited hello')
        # ...until the daemon has closed them.
        line = first.read_line(r'^contexts: ', timeout=30)
        closed = [a.read_until(r'closed a connection from pid (\d+): no hello within 5 s')
                  for _ in range(64)]
        check(all(int(m.group(1)) == os.getpid() for m in closed),
              'closed for want of hello: ' + ', '.join(m.group(0) for m in closed))
        for s in idle:
            s.settimeout(5)
            check(s.recv(1024) == b'', 'a silent connection was answered')
            s.close()
        check(line == 'contexts: 256 open, then EBUSY', line)
        second = App([args.helper, 'contexts', sock(args, 'app-a')])
        line = second.read_line(r'^contexts: ')
        check(line == 'contexts: 0 open, then EBUSY', f'another application: {line}')
        counted = ctl(args, 'a', 'stats')['applications']
        want = {'connected': 256, 'serving': 256, 'connections': 64 + 257 + 1, 'served': 256,
                'refused': 0, 'busy': 2, 'hello_timeouts': 64, 'gone': 0, 'events_dropped': 0,
                'events_lost': 0}
        check(counted == want, f'smrcctl stats: applications {counted}, want {want}')
        for app in (second, first):
            code, out = app.finish()
            check(code == 0, f'contexts: exit {code}: {out}')
        wait_for('the 256 applications gone', lambda: ctl(args, 'a', 'stats')['applications'][
            'gone'] == 256)
        run_example(args, a, b)
    with_pair(args, body)


def case_app_killed(args):
    def body(a, b):
        def sender_killed(sink_mode, receiver):
            """A stream from a to b's `sink_mode` whose sender is SIGKILLed
            mid-transfer: a frees what it had and tells b's QP, whose
            application hears at once."""
            tx = App([args.helper, 'stream', sock(args, 'app-a')])
            rx = App([args.helper, sink_mode, sock(args, 'app-b')])
            connect(tx, rx)
            tx.read_line(r'^written \d+', timeout=15)
            tx.read_line(r'^written \d+', timeout=15)  # mid-transfer
            tx.proc.kill()
            tx.proc.wait()
            a.read_until(r'application \d+ went away: 1 QPs destroyed, 1 regions freed',
                         timeout=10)
            line = rx.read_line(r'^event: QP fatal', timeout=10)  # not the ports' events
            check(line == 'event: QP fatal: remote operation error', f'{receiver}: {line}')
            rx.proc.kill()
            rx.proc.wait()
            b.read_until(r'application \d+ went away', timeout=10)

        sender_killed('sink', 'a receiver in RTS')
        sender_killed('sink_rtr', 'a receiver that left its QP in RTR')
        # With every plane of a down when the sender dies, its first notice
        # cannot leave: a later round (at 17, 50, 117, 252, 520, 1057 ms...
        # for the helper's ACK timeout) tells the receiver once one is up.
        tx = App([args.helper, 'stream', sock(args, 'app-a')])
        rx = App([args.helper, 'sink_rtr', sock(args, 'app-b')])
        connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        for plane in range(PLANES):
            ctl(args, 'a', 'port', 'set', 'a', str(plane), 'down')
        tx.proc.kill()
        tx.proc.wait()
        a.read_until(r'application \d+ went away: 1 QPs destroyed', timeout=10)
        check(no_line(rx, r'^event: QP fatal', 0.5), 'the receiver heard while a had no plane')
        ctl(args, 'a', 'port', 'set', 'a', '0', 'up')
        line = rx.read_line(r'^event: QP fatal', timeout=10)
        check(line == 'event: QP fatal: remote operation error', f'after a plane came up: {line}')
        ctl(args, 'a', 'port', 'set', 'a', '1', 'up')
        rx.proc.kill()
        rx.proc.wait()
        b.read_until(r'application \d+ went away', timeout=10)
        # ...and so does a sender whose receiver is killed.
        tx = App([args.helper, 'stream', sock(args, 'app-b')])
        rx = App([args.helper, 'sink', sock(args, 'app-a')])
        connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        rx.proc.kill()
        rx.proc.wait()
        line = tx.read_line(r'^peer gone: ', timeout=10)
        check(line.startswith('peer gone: remote operation error after '), line)
        code, out = tx.finish()
        check(code == 0, f'sender {code}: {out}')
        a.read_until(r'application \d+ went away', timeout=10)
        # Both daemons go on serving applications.
        run_example(args, a, b)
        check(a.proc.poll() is None and b.proc.poll() is None, 'a daemon exited')
    with_pair(args, body)


def trespassed(args, holder, qp_app):
    """A trespasser on daemon b, the peer of qp_app's QP, writes where
    holder's "victim" line says: it must get REM_ACCESS_ERR. Then holder
    checks its region; what it printed."""
    trespasser = App([args.helper, 'trespass', sock(args, 'app-b')])
    connect(qp_app, trespasser)
    trespasser.send(holder.read_line(r'^victim \d+ \d+ \d+$'))
    line = trespasser.read_line(r'^trespass: ', timeout=20)
    check(line == 'trespass: remote access error', line)
    holder.send('check')
    code, out = holder.finish()
    print(out, end='')
    check(code == 0 and 'FAIL' not in out, f'the region holder {code}: {out}')
    code, tout = trespasser.finish()
    check(code == 0, f'trespasser {code}: {tout}')
    return out


def case_foreign_rkey(args):
    def body(a, b):
        # y's QP and the victim's region are two applications of daemon a; the
        # trespasser, y's peer on b, learns the victim's key and address.
        victim = App([args.helper, 'victim', sock(args, 'app-a')])
        y = App([args.helper, 'sink', sock(args, 'app-a')])
        trespassed(args, victim, y)
    with_pair(args, body)


def case_pd_isolation(args):
    def body(a, b):
        # x's QP and its second PD's region: the peer, the trespasser, learns
        # that region's key and address; then x tries it locally too.
        x = App([args.helper, 'two_pds', sock(args, 'app-a')])
        out = trespassed(args, x, x)
        check('victim: 65536 of 65536 bytes intact' in out and
              'local: local protection error' in out, out)
    with_pair(args, body)


def case_recv_behind_sends(args):
    def body(a, b):
        deep = App([args.helper, 'recv_behind_sends', sock(args, 'app-a'), 'deep'])
        peer = App([args.helper, 'recv_behind_sends', sock(args, 'app-b'), 'wimm'])
        connect(deep, peer)
        deep.read_line(r'^posted$', timeout=15)
        peer.send('go')
        deep.read_line(r'^done$', timeout=30)
        peer.send('done')
        code_d, out_d = deep.finish(timeout=10)
        code_p, out_p = peer.finish(timeout=10)
        print(out_d + out_p, end='')
        check(code_d == 0 and 'FAIL' not in out_d, f'deep side {code_d}: {out_d}')
        check(code_p == 0 and 'FAIL' not in out_p, f'wimm side {code_p}: {out_p}')
    with_pair(args, body)


def case_daemon_killed(args):
    def body(a, b):
        app = App([args.helper, 'daemon_dies', sock(args, 'app-a')])
        app.read_line(r'^ready$')
        a.kill()
        t0 = time.monotonic()
        code, out = app.finish(timeout=25)
        print(out, end='')
        check(code == 0 and 'FAIL' not in out, f'daemon_dies exit {code}:\n{out}')
        print(f'the application saw the daemon go in {time.monotonic() - t0:.2f} s')
        # Its socket files stay behind (the applications', the controller's
        # and its memif servers'): a new pair replaces them and serves.
        stop(b)
        stale = ['app-a', 'ctl-a'] + [f'memif-p{p}' for p in range(PLANES)]
        for name in stale:
            check(os.path.exists(sock(args, name)), f'{name}.sock went with its daemon')
        a2 = b2 = None
        try:
            a2 = start_daemon(args, 'a')
            b2 = start_daemon(args, 'b')
            wait_planes_in_use(a2, 'a')
            wait_planes_in_use(b2, 'b')
            run_example(args, a2, b2)
            check(ctl(args, 'a', 'stats')['applications']['gone'] == 1, 'the new daemon: stats')
        finally:
            stop(a2, b2)
    with_pair(args, body)


def case_daemon_stopped(args):
    def body(a, b):
        app = App([args.helper, 'daemon_stops', sock(args, 'app-a'), '1000'])
        app.read_line(r'^ready$')
        a.proc.send_signal(signal.SIGSTOP)
        try:
            app.send('stopped')
            app.read_line(r'^given up$', timeout=30)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        # The application holds its context: the library's hang-up alone
        # tells the daemon, running again, that it is gone.
        a.read_until(r'application \d+ went away: 1 QPs destroyed, 1 regions freed', timeout=10)
        wait_for('a to serve no application',
                 lambda: ctl(args, 'a', 'stats')['applications']['serving'] == 0, timeout=10)
        app.send('freed')
        code, out = app.finish()
        print(out, end='')
        check(code == 0 and 'FAIL' not in out, f'daemon_stops exit {code}:\n{out}')
        run_example(args, a, b)
    with_pair(args, body)


def case_server_restarts(args):
    def body(a, b):
        t = Telemetry(telemetry_socket(b.prefix))
        wait_planes_in_use(b, 'b')  # so that each goes down once
        server, client = a, b
        try:
            for turn in (1, 2):
                stop(server)
                down = set()  # the planes go down in any order
                while len(down) < PLANES:
                    down.add(b.read_until(r'b plane (\d+) down \(peer closing\)').group(1))
                server = start_daemon(args, 'a')
                wait_planes_in_use(server, 'a')
                wait_planes_in_use(b, 'b')
                ports = t.query('/softmrc/ports,b')
                check(all(r['reconnects'] >= turn for r in ports.values()),
                      f'turn {turn}: reconnects {ports}')
                run_example(args, server, b)
            # A client started before its server waits for it.
            stop(server, b)
            server = client = start_daemon(args, 'b')
            time.sleep(0.5)
            client._read(0.1)
            check(all(any(f'b plane {p} down (link down at start)' in line for line in client.lines)
                      for p in range(PLANES)), 'planes up without a server', client.output())
            check(client.proc.poll() is None, 'a client without its server exited')
            server = start_daemon(args, 'a')
            wait_planes_in_use(server, 'a')
            wait_planes_in_use(client, 'b')
            run_example(args, server, client)
        finally:
            if server is not a:
                stop(server)
            if client is not b:
                stop(client)
    with_pair(args, body)


def ctl(args, me, *words, want=None):
    """smrcctl --json on daemon `me`: the result, or (want: an errno) the refusal."""
    r = subprocess.run([args.smrcctl, '--socket', sock(args, f'ctl-{me}'), '--json'] +
                       list(words), capture_output=True, text=True, timeout=10, check=False)
    if want is None:
        check(r.returncode == 0, f'smrcctl {" ".join(words)}: exit {r.returncode}: {r.stderr}')
        return json.loads(r.stdout)
    check(r.returncode == 1 and r.stderr.startswith(f'smrcctl: {want}: '),
          f'smrcctl {" ".join(words)}: exit {r.returncode} {r.stderr!r}, want {want}')
    return r.stderr


def init_errno(args, ev, cc):
    r = subprocess.run([args.helper, 'init', sock(args, 'app-a'), str(ev), str(cc)],
                       capture_output=True, text=True, timeout=10, check=False)
    m = re.search(r'^init: (\S+)$', r.stdout, re.M)
    check(r.returncode == 0 and m, f'init {ev} {cc}: exit {r.returncode}: {r.stdout}{r.stderr}')
    return m.group(1)


def case_profiles(args):
    def body(a, b):
        # EV profile 10: generated from UDP format 1, 4 values on each of
        # the 2 ports; CC profile 3: NSCC.
        ctl(args, 'a', 'profile', 'ev', 'create', '10')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'mode', 'generated', 'fmt', '1', 'count',
            '8', 'fields', '16:0xd000:0:3:0x3', 'event_mask', 'good,assumed_bad,denied',
            'state', 'offline')
        ctl(args, 'a', 'profile', 'cc', 'create', '3')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'algorithm', 'nscc', 'link_gbps', '10',
            'base_rtt_us', '50', 'state', 'offline')
        for ev, cc, want in ((10, 0, 'EINVAL'), (0, 3, 'EINVAL'), (42, 0, 'ENOENT'),
                             (0, 42, 'ENOENT')):
            got = init_errno(args, ev, cc)
            check(got == want, f'INIT with EV {ev} CC {cc}: {got}, want {want}')
        print('ok: INIT with an OFFLINE profile -> EINVAL, an unknown one -> ENOENT')
        # EV profile 11: ONLINE, but made from format 2 (STEV) while the
        # endpoint's EV mode is UDP.
        ctl(args, 'a', 'profile', 'ev', 'create', '11')
        ctl(args, 'a', 'profile', 'ev', 'set', '11', 'mode', 'generated', 'fmt', '2', 'count',
            '8', 'fields', '16:0xd000:0:3:0x3/16:0x1000:0:0:0', 'state', 'offline')
        ctl(args, 'a', 'profile', 'ev', 'set', '11', 'state', 'online')
        got = init_errno(args, 11, 0)
        check(got == 'EINVAL', f'INIT with the STEV profile: {got}, want EINVAL')
        print("ok: INIT with an EV profile whose format is not the endpoint's EV mode -> EINVAL")
        ctl(args, 'a', 'profile', 'ev', 'set', '11', 'state', 'offline')
        ctl(args, 'a', 'profile', 'ev', 'destroy', '11')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'state', 'online')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'state', 'online')

        tx = App([args.helper, 'stream', sock(args, 'app-a'), '10', '3'])
        rx = App([args.helper, 'sink', sock(args, 'app-b')])
        qpn = connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        check(ctl(args, 'a', 'profile', 'ev', 'show', '10')['attached_qps'] == 1 and
              ctl(args, 'a', 'profile', 'cc', 'show', '3')['attached_qps'] == 1,
              'the application QP is not attached')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'state', 'offline', want='EBUSY')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'state', 'offline', want='EBUSY')
        ctl(args, 'a', 'profile', 'ev', 'destroy', '10', want='EBUSY')
        print('ok: profiles in use by an application QP stay ONLINE (EBUSY)')

        evs = ctl(args, 'a', 'ev', 'show', 'a', str(qpn))
        check([e['value'] for e in evs] == ['0xd000', '0xd000', '0xd001', '0xd001', '0xd002',
                                            '0xd002', '0xd003', '0xd003'] and
              [e['plane'] for e in evs] == [0, 1] * 4, f'the QP\'s EVs: {evs}')
        print("ok: the application QP's EVs are the profile's")

        # EV 2 is the profile's entry 2: the stored value, as the profile shows it.
        stored = ctl(args, 'a', 'profile', 'ev', 'show', '10')['evs'][2]
        check(stored['port'] == 1, f'entry 2: {stored}')
        ctl(args, 'a', 'profile', 'ev', 'ev-state', '10', stored['value'], '1', 'denied')
        wait_for('EV 2 DENIED', lambda: ctl(args, 'a', 'ev', 'show', 'a',
                                            str(qpn))[2]['state'] == 'DENIED')
        before = ctl(args, 'a', 'ev', 'show', 'a', str(qpn))
        time.sleep(0.3)
        evs = ctl(args, 'a', 'ev', 'show', 'a', str(qpn))
        check(evs[3]['tx_packets'] > before[3]['tx_packets'],
              f'the stream stopped: no packet on EV 3 in 0.3 s: {evs}')
        check(evs[2]['tx_packets'] == before[2]['tx_packets'],
              f'a denied EV still carries packets: {evs}')
        events = wait_for('the DENIED event', lambda: [
            e for e in ctl(args, 'a', 'events')
            if e['qpn'] == qpn and e['state'] == 'DENIED'])
        check(events[0]['profile'] == 10 and events[0]['owner'] == f'app {tx.proc.pid}' and
              events[0]['ev'] == 2 and events[0]['port'] == 1, f'the event: {events[0]}')
        ctl(args, 'a', 'profile', 'ev', 'ev-state', '10', stored['value'], '1', 'good')
        wait_for('EV 2 GOOD', lambda: ctl(args, 'a', 'ev', 'show', 'a',
                                          str(qpn))[2]['state'] == 'GOOD')
        print('ok: a profile EV denied and restored reaches the application QP; the event '
              'names its owner')

        tx.proc.kill()
        tx.proc.wait()
        a.read_until(r'application \d+ went away: 1 QPs destroyed', timeout=10)
        check(ctl(args, 'a', 'profile', 'ev', 'show', '10')['attached_qps'] == 0,
              'the QP of the application that went is still attached')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'state', 'offline')
        ctl(args, 'a', 'profile', 'ev', 'destroy', '10')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'state', 'offline')
        print('ok: detached when the application went; the profiles go OFFLINE')
        rx.proc.kill()
        rx.proc.wait()
    with_pair(args, body)


def case_init_again(args):
    def body(a, b):
        # The old profiles EV 10 and CC 3, the new EV 12 and CC 4, all
        # ONLINE; EV 11 OFFLINE. EV 12's values differ from EV 10's, CC 4
        # (NSCC) limits the window and CC 3 (none) does not.
        for ev, base in ((10, '0xd000'), (11, '0xc000'), (12, '0xe000')):
            ctl(args, 'a', 'profile', 'ev', 'create', str(ev))
            ctl(args, 'a', 'profile', 'ev', 'set', str(ev), 'mode', 'generated', 'fmt', '1',
                'count', '8', 'fields', f'16:{base}:0:3:0x3', 'state', 'offline')
        ctl(args, 'a', 'profile', 'cc', 'create', '3')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'algorithm', 'none', 'state', 'offline')
        ctl(args, 'a', 'profile', 'cc', 'create', '4')
        ctl(args, 'a', 'profile', 'cc', 'set', '4', 'algorithm', 'nscc', 'link_gbps', '10',
            'base_rtt_us', '50', 'state', 'offline')
        for kind, pid in (('ev', 10), ('ev', 12), ('cc', 3), ('cc', 4)):
            ctl(args, 'a', 'profile', kind, 'set', str(pid), 'state', 'online')
        # EV 12's entry 2 DENIED: the QP's EV 2 starts DENIED once it moves there.
        stored = ctl(args, 'a', 'profile', 'ev', 'show', '12')['evs'][2]
        ctl(args, 'a', 'profile', 'ev', 'ev-state', '12', stored['value'], '1', 'denied')

        def attached():
            return [ctl(args, 'a', 'profile', kind, 'show', str(pid))['attached_qps']
                    for kind, pid in (('ev', 10), ('cc', 3), ('ev', 12), ('cc', 4))]

        qp = App([args.helper, 'init_again', sock(args, 'app-a'), '10', '3', '12', '4', '11'])
        peer = App([args.helper, 'recv_behind_sends', sock(args, 'app-b'), 'wimm'])
        qp.read_line(r'^kept$')
        check(attached() == [1, 1, 0, 0],
              f'after the refused moves, attached QPs of EV 10, CC 3, EV 12, CC 4: {attached()}')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'state', 'offline', want='EBUSY')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'state', 'offline', want='EBUSY')
        print('ok: refused INIT -> INIT moves leave the QP attached to its old profiles')
        qp.send('go')
        qp.read_line(r'^half$')
        check(attached() == [1, 0, 0, 1],
              f'after the move of the CC profile, attached QPs of EV 10, CC 3, EV 12, CC 4: '
              f'{attached()}')
        print('ok: INIT -> INIT naming the CC profile moves that one only')
        qp.send('go')

        qpn = connect(qp, peer)
        qp.read_line(r'^written$', timeout=30)
        check(attached() == [0, 0, 1, 1],
              f'after the move, attached QPs of EV 10, CC 3, EV 12, CC 4: {attached()}')
        ctl(args, 'a', 'profile', 'ev', 'set', '12', 'state', 'offline', want='EBUSY')
        ctl(args, 'a', 'profile', 'cc', 'set', '4', 'state', 'offline', want='EBUSY')
        ctl(args, 'a', 'profile', 'ev', 'set', '10', 'state', 'offline')
        ctl(args, 'a', 'profile', 'cc', 'set', '3', 'state', 'offline')
        print('ok: after INIT -> INIT the old profiles go OFFLINE, the new ones are in use '
              '(EBUSY)')
        evs = ctl(args, 'a', 'ev', 'show', 'a', str(qpn))
        check([e['value'] for e in evs] == ['0xe000', '0xe000', '0xe001', '0xe001', '0xe002',
                                            '0xe002', '0xe003', '0xe003'],
              f"the QP's EVs are not EV profile 12's: {evs}")
        # (Another EV may be ASSUMED_BAD for a while: the first Write can
        # reach the peer before its QP is in RTR.)
        check([e['state'] == 'DENIED' for e in evs] == [False] * 2 + [True] + [False] * 5,
              f"the QP's EV states are not EV profile 12's: {evs}")
        ctl(args, 'a', 'profile', 'ev', 'ev-state', '12', stored['value'], '1', 'good')
        wait_for('EV 2 GOOD', lambda: ctl(args, 'a', 'ev', 'show', 'a',
                                          str(qpn))[2]['state'] == 'GOOD')
        print("ok: the QP's EVs are the new profile's, with their states, and follow it")
        cwnd = wait_for('the QP in the stats', lambda: ctl(
            args, 'a', 'stats', 'qp', 'a', str(qpn))[0]['cwnd_bytes'])
        check(cwnd < 1 << 40, f"the QP's window is not CC profile 4's (NSCC): {cwnd}")
        print("ok: the QP's congestion control is the new profile's")

        peer.send('go')
        qp.read_line(r'^done$', timeout=30)
        peer.send('done')
        code, out = peer.finish()
        check(code == 0 and 'FAIL' not in out, f'wimm exit {code}: {out}')
        code, out = qp.finish()
        print(out, end='')
        check(code == 0 and 'FAIL' not in out and out.count('ok: ') >= 16,
              f'init_again exit {code}: {out}')
        print('ok: the QP connected on the new profiles, its Write completed and the receive '
              'posted before INIT -> INIT took the immediate')
    with_pair(args, body)


def case_reports(args):
    def body(a, b):
        tx = App([args.helper, 'stream', sock(args, 'app-a')])
        rx = App([args.helper, 'sink', sock(args, 'app-b')])
        qpn = connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        row = f'a/{qpn}'
        owner = f'app {tx.proc.pid}'
        t = Telemetry(telemetry_socket(a.prefix))
        qps = t.query('/softmrc/qps')
        check(row in qps and qps[row]['owner'] == owner and qps[row]['state'] == 'RTS',
              f'/softmrc/qps: {qps}')
        first = t.query(f'/softmrc/qp,a,{qpn}')[row]['tx_data_packets']
        stats = wait_for('counters to grow', lambda: [
            q for q in ctl(args, 'a', 'stats')['qps']
            if q['name'] == row and q['tx_data_packets'] > first])
        check(stats[0]['owner'] == owner, f'smrcctl stats: {stats}')
        qp = ctl(args, 'a', 'stats', 'qp', 'a', str(qpn))[0]
        check(qp['owner'] == owner and qp['send_completions'] > 0, f'smrcctl stats qp: {qp}')
        evs = ctl(args, 'a', 'ev', 'show', 'a', str(qpn))
        check(len(evs) > 0 and sum(e['tx_packets'] for e in evs) > 0, f'ev show: {evs}')
        print(f'ok: {row} ({owner}) in /softmrc/qps, /softmrc/qp, smrcctl stats and ev show, '
              'its counters growing')
        tx.proc.kill()
        rx.proc.kill()
        tx.proc.wait()
        rx.proc.wait()
    with_pair(args, body)


def case_port_events(args):
    def body(a, b):
        wait_planes_in_use(a, 'a')
        app = App([args.helper, 'port_events', sock(args, 'app-a'), '1'])
        app.read_line(r'^ready$')
        # An operator takes a plane down and up: the application hears both.
        ctl(args, 'a', 'port', 'set', 'a', '1', 'down')
        app.read_line(r'^event: port error plane 1$')
        ctl(args, 'a', 'port', 'set', 'a', '1', 'up')
        app.read_line(r'^event: port active plane 1$')
        code, out = app.finish()
        check(code == 0, f'port_events exit {code}: {out}')
        print('ok: smrcctl port set down/up reached the application as PORT_ERR, PORT_ACTIVE')
        # An application that takes no event for a while: far more changes
        # than its socket holds wait in the daemon, none lost.
        later = App([args.helper, 'port_events_later', sock(args, 'app-a'), '1'])
        later.read_line(r'^ready$')
        rounds = 200
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(sock(args, 'ctl-a'))
            f = c.makefile('rw')
            for _ in range(rounds):
                for state in ('down', 'up'):
                    f.write(f'port set a 1 {state}\n')
                    f.flush()
                    reply = json.loads(f.readline())
                    check(reply.get('ok'), f'port set a 1 {state}: {reply}')
        later.proc.stdin.write(b'go\n')
        later.proc.stdin.flush()
        line = later.read_line(r'^events: ', timeout=30)
        check(line == f'events: {2 * rounds} on plane 1, in order', line)
        code, out = later.finish()
        check(code == 0, f'port_events_later exit {code}: {out}')
        dropped = ctl(args, 'a', 'stats')['applications']['events_dropped']
        check(dropped == 0, f'{dropped} events dropped')
        print(f'ok: {2 * rounds} plane changes waited for an application that took none, in order')
    with_pair(args, body)


def case_sigterm_flush(args):
    def body(a, b):
        tx = App([args.helper, 'stream_flush', sock(args, 'app-a')])
        rx = App([args.helper, 'sink', sock(args, 'app-b')])
        connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        a.proc.send_signal(signal.SIGTERM)
        code, out = tx.finish(timeout=15)
        print(out, end='')
        check(code == 0 and re.search(r'^flushed [1-9]\d* after \d+ written, then ENOTCONN$',
                                      out, re.M), f'stream_flush exit {code}:\n{out}')
        check(a.wait(10) == 0, 'a exit status')
        check(re.search(r'a: 1 application QPs moved to ERROR at the flush', a.output()),
              'no flush line')
        # The flush told the receiver's QP, as an application's exit does.
        line = rx.read_line(r'^event: QP fatal', timeout=10)
        check(line == 'event: QP fatal: remote operation error', f'the receiver: {line}')
        print('ok: SIGTERM flushed the application QP, then ENOTCONN; its peer QP failed')
        rx.proc.kill()
        rx.proc.wait()
    with_pair(args, body, extra={'shutdown': {'drain_ms': 300}})


def case_stop_together(args):
    rounds = 20
    for i in range(rounds):
        a, b = start_pair(args, {'timeout': 14})
        try:
            wait_planes_in_use(b, 'b')
        except Failure as e:
            stop(a, b)
            raise Failure(str(e) + outputs(a, b)) from None
        stop(a, b)
        check((a.proc.returncode, b.proc.returncode) == (0, 0),
              f'round {i + 1}: daemons exited {a.proc.returncode}, {b.proc.returncode}' +
              outputs(a, b))
    print(f'ok: {rounds} pairs stopped together, every daemon exited 0')


def case_stop_one_side(args):
    rounds = 10
    for first in ('a', 'b'):
        for i in range(rounds):
            a, b = start_pair(args, {'timeout': 14})
            try:
                wait_planes_in_use(b, 'b')
                gone, other = (a, b) if first == 'a' else (b, a)
                stop(gone)
                check(gone.proc.returncode == 0, f'{first} exited {gone.proc.returncode}')
                planes = {other.read_until(r'plane (\d+) down \(peer closing\)',
                                           timeout=10).group(1) for _ in range(PLANES)}
                check(planes == {str(p) for p in range(PLANES)}, f'planes {planes} went down')
                time.sleep(0.1)
                check(other.proc.poll() is None, f'the other daemon exited after {first} went')
                stop(other)
                check(other.proc.returncode == 0, f'the other exited {other.proc.returncode}')
            except Failure as e:
                stop(a, b)
                raise Failure(f'{first} first, round {i + 1}: {e}' + outputs(a, b)) from None
    print(f'ok: {rounds} times each, one daemon stopped, the other heard its farewell, '
          'went on and exited 0')


def case_protocol_storm(args):
    # Seed 1 against daemons that copy payloads into mbufs, seed 2 against
    # daemons that send them in place from the applications' regions
    # (tx_payload: extbuf), where a region freed with packets in flight is
    # retired until no mbuf points into it.
    runs = [(1, {}), (2, {'tx_payload': 'extbuf'})]
    if 'SMRC_STORM_SEED' in os.environ:
        seed = int(os.environ['SMRC_STORM_SEED'], 0)
        runs = [(seed, extra) for _, extra in runs]
    rounds = os.environ.get('SMRC_STORM_ROUNDS', '5000')

    for seed, extra in runs:
        def body(a, b):
            r = subprocess.run([args.storm, sock(args, 'app-a'), 'fd00:0:0:0::b', str(seed),
                                rounds], capture_output=True, text=True, timeout=240, check=False)
            print(r.stdout, end='')
            check(r.returncode == 0 and 'FAIL' not in r.stdout,
                  f'storm (replay: SMRC_STORM_SEED={seed} SMRC_STORM_ROUNDS={rounds}, {extra}) '
                  f'exit {r.returncode}\n{r.stdout}{r.stderr}')
            check(a.proc.poll() is None, f'daemon a exited {a.proc.returncode} under the storm')
            m = re.search(r'^ok: (\d+) requests \((\d+) refused\), (\d+) work requests posted',
                          r.stdout, re.M)
            check(m is not None and int(m.group(1)) >= int(rounds) // 10 and
                  int(m.group(2)) > 0 and int(m.group(3)) > 0,
                  f'the storm did too little: {m and m.group(0)}')
            run_example(args, a, b)
            stop(a, b)
            check(a.proc.returncode == 0 and b.proc.returncode == 0,
                  f'exit status a {a.proc.returncode}, b {b.proc.returncode}')
            m = a.read_until(r'a: sent (\d+) packets \((\d+) with the payload sent in place\)')
            print(f'{extra or "copy"}: a sent {m.group(1)} packets, {m.group(2)} in place')
            if extra:
                check(int(m.group(2)) > 0, 'no payload sent in place: extbuf was not exercised')
        with_pair(args, body, extra)


if __name__ == '__main__':
    sys.exit(test_main(globals(), __doc__, 'example', 'helper', 'storm', 'smrcctl'))
