#!/usr/bin/env bash
# scripts/demo.sh's steps before softmrcd, on a copy of the script with a
# fake ninja and a fake softmrcd: a missing build and a failed build each
# stop it with a non-zero status and a message saying why (the build's
# errors shown, not swallowed); a good build runs softmrcd with the
# documented command line and passes its exit status on.
#   demo_script_test.sh <source root>
set -uo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

mkdir -p "$tmp/tree/scripts" "$tmp/tree/build/app" "$tmp/bin"
cp "$root/scripts/demo.sh" "$tmp/tree/scripts/"
demo=$tmp/tree/scripts/demo.sh

out=$(PATH="$tmp/bin:$PATH" "$demo" 2>&1)
status=$?
[[ $status != 0 && $out == *"run scripts/setup.sh first"* ]] ||
  fail "no build: exit $status: $out"

printf '#!/bin/sh\necho "softmrcd $*"\nexit 3\n' >"$tmp/tree/build/app/softmrcd"
chmod +x "$tmp/tree/build/app/softmrcd"
printf '#!/bin/sh\necho "FAILED: qp.cc.o"\necho "qp.cc:1:1: error: boom" >&2\nexit 1\n' >"$tmp/bin/ninja"
chmod +x "$tmp/bin/ninja"
out=$(PATH="$tmp/bin:$PATH" "$demo" 2>&1)
status=$?
[[ $status != 0 ]] || fail "a failed build: exit 0"
[[ $out == *"demo: the build failed"* ]] || fail "a failed build: no message saying so: $out"
[[ $out == *"qp.cc:1:1: error: boom"* && $out == *"FAILED: qp.cc.o"* ]] ||
  fail "a failed build: the build's errors were not shown: $out"
[[ $out != *"softmrcd "* ]] || fail "a failed build: softmrcd ran anyway: $out"

printf '#!/bin/sh\necho "ninja: no work to do."\n' >"$tmp/bin/ninja"
out=$(PATH="$tmp/bin:$PATH" "$demo" -i 2>&1)
status=$?
[[ $status == 3 ]] || fail "softmrcd's exit status 3 came back as $status"
[[ $out == *"--config config/softmrcd/demo.yaml -i"* ]] || fail "softmrcd ran as: $out"
[[ $out != *"no work to do"* ]] || fail "an up-to-date build was not quiet: $out"

((failures == 0)) && echo "demo_script_test: all checks passed"
exit $((failures > 0))
