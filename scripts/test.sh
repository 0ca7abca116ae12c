#!/usr/bin/env bash
# Runs every test suite and ends with the line "N passed, N failed".
#
#   build/      every suite except fuzz (unit, sim, dpdk, e2e, tool)
#   build-san/  every suite but fuzz again under ASan+UBSan (softmrcd,
#               libsoftmrc, the tools and the test programs instrumented;
#               DPDK not)
#   build-fuzz/ the whole tree built with clang, and the libFuzzer targets
#               (packets into wire::parse and into the engine, an
#               application's rings into softmrcd's AppStage, control socket
#               JSON, softmrcd's YAML configuration) run for a bounded time
#               each
#
# Needs scripts/setup.sh to have run once. Exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

configure() { # dir [meson setup options...]
  local dir=$1
  shift
  [[ -f $dir/build.ninja ]] || meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || {
    cat "$dir.setup.log"
    return 1
  }
}

passed=0
failed=0
count() { # dir: add up the results meson wrote for the last run in dir
  local log=$1/meson-logs/testlog.json
  if [[ ! -f $log ]]; then
    failed=$((failed + 1))
    return
  fi
  read -r p f < <(python3 - "$log" <<'PY'
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    result = json.loads(line).get("result")
    if result in ("OK", "EXPECTEDFAIL"):
        ok += 1
    elif result != "SKIP":
        bad += 1
print(ok, bad)
PY
)
  passed=$((passed + p))
  failed=$((failed + f))
}

run() { # dir [meson test options...]
  local dir=$1
  shift
  rm -f "$dir/meson-logs/testlog.json"
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    tail -40 "$dir.build.log"
    echo "test.sh: build failed in $dir" >&2
    failed=$((failed + 1))
    return
  fi
  meson test -C "$dir" --no-rebuild --print-errorlogs "$@"
  count "$dir"
}

configure build --buildtype=debugoptimized && run build --no-suite fuzz
configure build-san --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false &&
  run build-san --suite unit --suite sim --suite dpdk --suite e2e --suite tool
# Everything is built here, so that the tree keeps building with clang too.
CXX=clang++ configure build-fuzz --buildtype=debug -Dfuzz=true && run build-fuzz --suite fuzz

echo "$passed passed, $failed failed"
((failed == 0))
