#!/usr/bin/env bash
# smrc-sim's command line: --help names every option, bad arguments and
# bad scenario files fail with status 2 and a message naming the option or
# key, a small run writes results that parse, and a corrupt fault sets the
# exit status as --help says.
#   cli_test.sh <smrc-sim binary> <source root>
set -uo pipefail
sim=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect <status> <text in stderr or stdout> <args...>
expect() {
  local want=$1 text=$2
  shift 2
  local out status
  out=$("$sim" "$@" 2>&1)
  status=$?
  [[ $status == "$want" ]] || fail "smrc-sim $* exited $status, wanted $want: $out"
  [[ $out == *"$text"* ]] || fail "smrc-sim $* did not say '$text': $out"
}

help=$("$sim" --help) || fail "--help exited non-zero"
for opt in --seed --seeds --jobs --transport --out --trace --framed --progress --no-progress \
  --quiet --help; do
  [[ $help == *"$opt "* ]] || fail "--help does not mention $opt"
done

cat >"$tmp/tiny.yaml" <<'YAML'
name: tiny
topology: {hosts: 4, planes: 2, radix: 4}
workload: {pattern: permutation, message_kib: 16, steps: 2}
YAML
printf 'topology: {hosts: 4, radix: 4}\nworkload: {pattern: all}\n' >"$tmp/bad.yaml"

expect 2 "no scenario file given"
expect 2 "--seeds: not an integer in 1..10000 (got '0')" "$tmp/tiny.yaml" --seeds 0
expect 2 "--transport: must be mrc, roce or both (got 'ib')" "$tmp/tiny.yaml" --transport ib
expect 2 "unrecognized option" "$tmp/tiny.yaml" --bogus
expect 2 "$tmp/missing.yaml: cannot read the file" "$tmp/missing.yaml"
expect 2 "bad.yaml: workload.pattern: must be one of" "$tmp/bad.yaml"
printf 'topology: {hosts: 4, radix: 4}\n? [x]\n: 1\n' >"$tmp/key.yaml"
expect 2 "key.yaml: the key on line 2 is a list or mapping, not a name" "$tmp/key.yaml"
expect 2 "--trace needs a single run" "$tmp/tiny.yaml" --trace "$tmp/t.trace"
# Seeds count up from the first one, and do not wrap round to 0.
expect 2 "--seeds: 2 seeds from 18446744073709551615 would pass the last seed" \
  "$tmp/tiny.yaml" --seed 18446744073709551615 --seeds 2
expect 0 "mrc seed 18446744073709551615" "$tmp/tiny.yaml" --seed 18446744073709551615 \
  --transport mrc

expect 0 "every step completed" "$tmp/tiny.yaml" --seeds 2 --jobs 2 --out "$tmp/out" --no-progress
for f in summary.json steps.csv timeseries.csv hosts.csv; do
  [[ -s $tmp/out/$f ]] || fail "--out did not write $f"
done
runs=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' \
  "$tmp/out/summary.json") || fail "summary.json does not parse"
[[ ${runs:-0} == 4 ]] || fail "summary.json has ${runs:-0} runs, wanted 4 (2 seeds x 2 transports)"
steps=$(($(wc -l <"$tmp/out/steps.csv") - 1))
[[ $steps == 8 ]] || fail "steps.csv has $steps rows, wanted 8"

expect 0 "" "$tmp/tiny.yaml" --transport mrc --trace "$tmp/t.trace" --quiet

# A run stopped before any step completed has no step time (not 0.0 us).
cat >"$tmp/stuck.yaml" <<'YAML'
topology: {hosts: 4, radix: 4}
faults: [{type: blackhole, at_us: 0, plane: 0, host: 1}]
workload: {message_kib: 64}
run: {time_limit_ms: 0.1}
YAML
expect 0 "step time us: no step completed" "$tmp/stuck.yaml" --transport roce
out=$("$sim" "$tmp/stuck.yaml" --transport roce 2>&1)
[[ $out != *"step time us: p50"* ]] || fail "a run with no complete step printed step times: $out"
grep -q "step 1 ends" "$tmp/t.trace" || fail "the trace has no 'step 1 ends' line"

# A switch that corrupts payload and recomputes the ICRC: only the byte
# check catches it, and a run that delivered wrong bytes exits 1. With the
# ICRC left stale the receiver drops the frames, MRC resends them, and the
# run succeeds. Where no bytes travel the fault is refused.
cat >"$tmp/corrupt.yaml" <<'YAML'
topology: {hosts: 8, planes: 2, radix: 4}
faults:
  - {type: corrupt, at_us: 0, plane: 0, all_fabric_links: true, probability: 0.05, icrc: recompute}
workload: {pattern: permutation, message_kib: 64, steps: 2}
transports: [mrc]
run: {framed: true}
YAML
expect 1 "verification failures" "$tmp/corrupt.yaml" --no-progress
sed 's/icrc: recompute/icrc: keep/' "$tmp/corrupt.yaml" >"$tmp/corrupt-keep.yaml"
expect 0 "every step completed" "$tmp/corrupt-keep.yaml" --no-progress
out=$("$sim" "$tmp/corrupt-keep.yaml" --no-progress 2>&1)
[[ $out =~ "ICRC errors "[1-9][0-9]*", parse errors 0, verification failures 0" ]] ||
  fail "a stale-ICRC corruption was not dropped by the ICRC check alone: $out"
sed '/^run:/d' "$tmp/corrupt-keep.yaml" >"$tmp/corrupt-unframed.yaml"
expect 2 "corrupt-unframed.yaml: faults[0]: a corrupt fault needs framed packets" \
  "$tmp/corrupt-unframed.yaml"
expect 0 "every step completed" "$tmp/corrupt-unframed.yaml" --framed --no-progress
expect 2 "faults[0]: a corrupt fault needs MRC" "$tmp/corrupt-keep.yaml" --transport roce

# The shipped reference scenario replays to its checked-in trace from the CLI too.
"$sim" "$root/test/sim/reference/reference.yaml" --transport roce --trace "$tmp/r.trace" --quiet ||
  fail "reference run failed"
cmp -s "$tmp/r.trace" "$root/test/sim/reference/reference-roce.trace" ||
  fail "the CLI's reference trace differs from test/sim/reference/reference-roce.trace"

((failures == 0)) && echo "cli_test: all checks passed"
exit $((failures > 0))
