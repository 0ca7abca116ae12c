#!/usr/bin/env python3
"""Seeded random command lines against every softmrc program.

Command-line arguments are untrusted input: whatever they are, a program
must answer with one of its documented exit statuses and, when it refuses,
a message, and never die of a signal, hang or trip a sanitizer. Each
program gets --rounds command lines drawn from its own --help (options,
subcommands), values around the edges of every range (empty, negative,
huge, not numbers, lists, long, non-ASCII) and files (missing, empty, a
directory, bytes that are no YAML, a small valid scenario). Nothing runs
for real: softmrcd and smrc-fabric never get a valid configuration (so they
stop before EAL), smrcctl and smrc-perf get no daemon, smrc-sim and
smrc-loopback get small workloads.

  cli_storm.py --bin NAME=PATH ... [--seed N] [--rounds N] --workdir DIR

SMRC_CLI_SEED and SMRC_CLI_ROUNDS override --seed and --rounds; a failure
prints the seed and the command line, so one run can be replayed.
"""
import argparse
import os
import random
import re
import shlex
import subprocess
import sys

SANITIZER = re.compile(r'AddressSanitizer|LeakSanitizer|runtime error:|Sanitizer')
SHORT_HELP = re.compile(r'-[^-]*h')  # -h, alone or in a cluster of short options
OPTION = re.compile(r'(?<![\w$-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])')

NUMBERS = ['0', '1', '2', '3', '-1', '-0', '+3', '0x10', '0x', '010', '1.5', '1e3', '1k',
           ' 5', '5 ', '4096', '65536', '4294967295', '4294967296',
           '18446744073709551615', '18446744073709551616', '9' * 40, 'nan', 'inf']
TEXT = ['', 'x', 'up', 'down', 'none', 'both', 'mrc', 'roce', 'udp', 'srv6', 'nscc',
        'rr', 'ecn-avoid', 'a,b', '1,2', '1,,2', ',', '1:2:3:4:5', '1:2:3:4:5/6:7:8:9:10',
        'eta=1', 'base_rtt_ns=', '=', '%s%n%x', 'é\u00ff', '\x01\x7f', '-', '--', 'a' * 5000,
        'probe', 'rx:4096', 'tx:0', 'rx:', '127.0.0.1', '::1', 'localhost', 'no.such.host']

# What each program may answer: its documented exit statuses (--help),
# whether it can succeed at all without a daemon or a valid configuration
# (else 0 means help or the version was asked for), fixed arguments before and after the
# drawn ones (after: they win, so that a run stays small), and the words
# it takes besides options.
PROGRAMS = {
    'softmrcd': dict(exits={0, 2}, can_succeed=False, lead=['--'], tail=[], words=[]),
    'smrc-fabric': dict(exits={0, 2}, can_succeed=False, lead=['--'], tail=[], words=[]),
    'smrcctl': dict(exits={0, 1, 2, 3, 4, 5, 6}, can_succeed=False, lead=[], tail=[],
                    words=['dev', 'show', 'port', 'set', 'ev', 'deny', 'restore', 'probe',
                           'events', 'stats', 'qp', 'profile', 'fmt', 'cc', 'create',
                           'destroy', 'replace', 'ev-state', 'mode', 'widths', 'state',
                           'count', 'min_active', 'event_mask', 'fields', 'algorithm',
                           'link_gbps', 'base_rtt_us', 'good', 'denied', 'online',
                           'offline', 'init', 'a', 'b']),
    'smrc-perf': dict(exits={0, 1, 2}, can_succeed=False, lead=[], tail=[],
                      words=['write_bw', 'write_lat', 'read_bw']),
    'smrc-sim': dict(exits={0, 1, 2}, can_succeed=True, lead=[], tail=[], words=[]),
    'smrc-loopback': dict(exits={0, 1, 2}, can_succeed=True, lead=[],
                          tail=['--gib', '0.02', '--msg-kib', '64'], words=[]),
}


def make_files(workdir):
    files = {}
    os.makedirs(workdir, exist_ok=True)

    def put(name, data):
        path = os.path.join(workdir, name)
        with open(path, 'wb') as f:
            f.write(data)
        files[name] = path

    put('empty.yaml', b'')
    put('broken.yaml', b'endpoints: [{name: a, planes: [\n')
    put('binary.yaml', bytes(range(256)) * 4)
    put('wrong.yaml', b'endpoints: 3\nlinks: {a: b}\nstats: []\n')
    put('tiny.yaml', b'name: tiny\ntopology: {hosts: 4, planes: 2, radix: 4}\n'
                     b'workload: {pattern: permutation, message_kib: 16, steps: 2}\n')
    files['dir'] = workdir
    files['missing'] = os.path.join(workdir, 'no', 'such', 'file')
    return list(files.values())


def help_options(path, lead):
    # softmrcd and smrc-fabric read their own options after '--'.
    r = subprocess.run([path] + lead + ['--help'], capture_output=True, text=True,
                       timeout=60, check=False)
    opts = sorted(set(OPTION.findall(r.stdout + r.stderr)))
    if r.returncode != 0 or len(opts) < 3:
        sys.exit(f'{path} --help: exit {r.returncode}, options {opts}')
    return opts


def command_line(rng, prog, opts, files):
    values = NUMBERS + TEXT + files
    args = []
    for _ in range(rng.randrange(0, 9)):
        pick = rng.random()
        if pick < 0.55:
            args.append(rng.choice(opts))
            if rng.random() < 0.7:
                args.append(rng.choice(values))
        elif pick < 0.75 and prog['words']:
            args.append(rng.choice(prog['words']))
        elif pick < 0.8:
            args.append(rng.choice(opts) + '=' + rng.choice(values))
        else:
            args.append(rng.choice(values))
    return args


def asks_help_or_version(arg):
    """-h, or --help or --version as getopt_long takes them: abbreviated,
    with '=...' (no other long option of these programs starts with h or v,
    so every abbreviation is unique)."""
    if SHORT_HELP.match(arg):
        return True
    name = arg[2:].split('=', 1)[0]
    return arg.startswith('--') and name != '' and ('help'.startswith(name) or
                                                    'version'.startswith(name))


def run(path, prog, args, env, timeout, cwd):
    # In cwd, since --out and --trace take relative paths too.
    cmd = [path] + prog['lead'] + args + prog['tail']
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False, env=env,
                           stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        return cmd, f'still running after {timeout} s', None
    err = r.stderr.decode(errors='replace')
    # The programs answer help and --version as soon as they parse them.
    asked = any(asks_help_or_version(a) for a in args)
    if r.returncode < 0:
        return cmd, f'killed by signal {-r.returncode}: {err[-2000:]}', r.returncode
    if SANITIZER.search(err):
        return cmd, f'sanitizer: {err[-4000:]}', r.returncode
    if r.returncode not in prog['exits']:
        return cmd, f'exit {r.returncode}, not one of {sorted(prog["exits"])}: {err[-2000:]}', \
            r.returncode
    if r.returncode != 0 and not err.strip():
        return cmd, f'exit {r.returncode} without a message', r.returncode
    if r.returncode == 0 and not prog['can_succeed'] and not asked:
        return cmd, 'exit 0, yet there was nothing it could do', r.returncode
    return cmd, None, r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--bin', action='append', required=True, help='NAME=PATH')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--rounds', type=int, default=150)
    ap.add_argument('--timeout', type=float, default=60)
    ap.add_argument('--workdir', required=True)
    a = ap.parse_args()
    seed = int(os.environ.get('SMRC_CLI_SEED', a.seed))
    rounds = int(os.environ.get('SMRC_CLI_ROUNDS', a.rounds))
    files = make_files(a.workdir)
    env = dict(os.environ, SOFTMRC_SOCKET=os.path.join(a.workdir, 'no-daemon.sock'))
    failures = 0
    for spec in a.bin:
        name, path = spec.split('=', 1)
        path = os.path.abspath(path)
        prog = PROGRAMS[name]
        opts = help_options(path, prog['lead'])
        rng = random.Random(f'{seed}/{name}')
        statuses = {}
        for i in range(rounds):
            args = command_line(rng, prog, opts, files)
            cmd, problem, status = run(path, prog, args, env, a.timeout, a.workdir)
            make_files(a.workdir)  # --out or --trace may have written over one
            statuses[status] = statuses.get(status, 0) + 1
            if problem:
                failures += 1
                print(f'FAIL (SMRC_CLI_SEED={seed}, {name} round {i}): '
                      f'{shlex.join(cmd)}\n  {problem}')
        summary = ', '.join(f'{n} x exit {s}' for s, n in sorted(statuses.items(),
                                                                  key=lambda x: str(x[0])))
        print(f'{name}: {rounds} command lines ({len(opts)} options from --help): {summary}')
    print(f'seed {seed}: {failures} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
