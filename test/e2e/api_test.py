#!/usr/bin/env python3
"""The application API end to end: softmrcd processes over net_memif, and
programs written against libsoftmrc. One --case per test:

  doc_matches_example  docs/api.md quotes docs/examples/wimm_exchange.c verbatim
  example              that program, receiver on daemon a, sender on daemon b:
                       a Write-with-Immediate, every byte checked
  misuse               every misuse path returns its documented error
  forged_descriptors   a raw client writes bad descriptors and a garbage index
                       straight into its ring: error completions, a QP-fatal
                       event, the daemon keeps serving
  app_killed           an application streaming Writes is SIGKILLed: its daemon
                       frees what it had and serves the example afterwards
  daemon_killed        the daemon is SIGKILLed under a blocked application:
                       every call fails with ENOTCONN, nothing hangs

Exit 0 on success, 1 with the reason and the daemons' output otherwise.
"""

import os
import re
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'dpdk'))
from softmrcd_test import Daemon, Failure, check, plane, test_main  # noqa: E402

PLANES = 2
LCORES = {'a': '0@1,1@0', 'b': '0@0,1@1'}


def config(args, me, qp=None):
    other = 'b' if me == 'a' else 'a'
    role = 'server' if me == 'a' else 'client'
    ports = [f'net_memif{p},role={role},id=0,socket={sock(args, f"memif-p{p}")},'
             'socket-abstract=no' for p in range(PLANES)]
    return {
        'path_mtu': 1024,
        'stats': {'snapshot_ms': 50, 'log_interval_ms': 0},
        # Small ACK timeout and retries: a peer QP that went away errors soon.
        'qp': qp if qp is not None else {'timeout': 12, 'retry_linear': 2, 'retry_exp': 2},
        'endpoints': [{'name': me, 'app_socket': sock(args, f'app-{me}'),
                       'planes': [dict(port=ports[p], **plane(me, p)) for p in range(PLANES)]}],
        'peers': [{'name': other, 'planes': [plane(other, p) for p in range(PLANES)]}],
    }


def sock(args, name):
    return os.path.join(args.workdir, name + '.sock')


def start_daemon(args, me, qp=None):
    d = Daemon(args, f'api_{args.case}_{me}', config(args, me, qp))
    i = d.cmd.index('-l')
    d.cmd[i:i + 2] = ['--lcores', LCORES[me]]
    d.start()
    d.read_until(r'applications connect to', timeout=15)
    return d


def start_pair(args, qp=None):
    for p in range(PLANES):
        path = sock(args, f'memif-p{p}')
        if os.path.exists(path):
            os.unlink(path)
    a = start_daemon(args, 'a', qp)
    # A memif client's port fails to start without its server's socket.
    deadline = time.monotonic() + 10
    while not all(os.path.exists(sock(args, f'memif-p{p}')) for p in range(PLANES)):
        check(time.monotonic() < deadline, 'no memif server sockets' + outputs(a))
        a._read(0.05)
    b = start_daemon(args, 'b', qp)
    return a, b


def stop(*daemons):
    for d in daemons:
        if d and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGTERM)
    for d in daemons:
        if d:
            try:
                d.wait(10)
            except Failure:
                d.proc.kill()


def outputs(*daemons):
    return ''.join(f'\n--- {d.prefix} ---\n' + d.output() for d in daemons if d)


class App:
    """A program whose stdout lines we read and whose stdin we write."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
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


def connect(x, y):
    """Cross the two programs' exchange lines."""
    lx = x.read_line(r'^\d+ \d+ \d+ \d+( \d+){16}$')
    ly = y.read_line(r'^\d+ \d+ \d+ \d+( \d+){16}$')
    x.send(ly)
    y.send(lx)


def run_example(args, a, b):
    rx = App([args.example, 'receiver', sock(args, 'app-a')])
    tx = App([args.example, 'sender', sock(args, 'app-b')])
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


def with_pair(args, body):
    a = b = None
    try:
        a, b = start_pair(args)
        body(a, b)
    except Failure as e:
        stop(a, b)
        raise Failure(str(e) + outputs(a, b)) from None
    stop(a, b)


def case_example(args):
    with_pair(args, lambda a, b: run_example(args, a, b))


def case_misuse(args):
    def body(a, b):
        n = run_checks(args, 'misuse', 'app-a', 'fd00:0:0:0::b')
        check(n >= 40, f'only {n} checks ran')
    with_pair(args, body)


def case_forged_descriptors(args):
    def body(a, b):
        run_checks(args, 'forge', 'app-a', 'fd00:0:0:0::b')
        # The daemon still serves a well-behaved pair afterwards.
        run_example(args, a, b)
    with_pair(args, body)


def case_app_killed(args):
    def body(a, b):
        tx = App([args.helper, 'stream', sock(args, 'app-a')])
        rx = App([args.helper, 'sink', sock(args, 'app-b')])
        connect(tx, rx)
        tx.read_line(r'^written \d+', timeout=15)
        tx.read_line(r'^written \d+', timeout=15)  # mid-transfer
        tx.proc.kill()
        tx.proc.wait()
        a.read_until(r'application \d+ went away: 1 QPs destroyed, 1 regions freed', timeout=10)
        # b's QP errors once its retries run out (the peer QP is gone)...
        rx.proc.kill()
        rx.proc.wait()
        b.read_until(r'application \d+ went away', timeout=10)
        # ...and both daemons go on serving applications.
        run_example(args, a, b)
        check(a.proc.poll() is None and b.proc.poll() is None, 'a daemon exited')
    with_pair(args, body)


def case_daemon_killed(args):
    def body(a, b):
        app = App([args.helper, 'daemon_dies', sock(args, 'app-a')])
        app.read_line(r'^ready$')
        a.proc.kill()
        a.proc.wait()
        t0 = time.monotonic()
        code, out = app.finish(timeout=25)
        print(out, end='')
        check(code == 0 and 'FAIL' not in out, f'daemon_dies exit {code}:\n{out}')
        print(f'the application saw the daemon go in {time.monotonic() - t0:.2f} s')
    with_pair(args, body)


if __name__ == '__main__':
    sys.exit(test_main(globals(), __doc__, 'example', 'helper'))
