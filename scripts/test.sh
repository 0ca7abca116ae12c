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
skipped=()
count() { # dir: add up the results meson wrote for the last run in dir
  local log=$1/meson-logs/testlog.json
  if [[ ! -f $log ]]; then
    failed=$((failed + 1))
    return
  fi
  local p f s
  read -r p f s < <(python3 - "$log" <<'PY'
import json, sys
ok = bad = 0
skips = []
for line in open(sys.argv[1]):
    test = json.loads(line)
    result = test.get("result")
    if result in ("OK", "EXPECTEDFAIL"):
        ok += 1
    elif result == "SKIP":
        skips.append(test.get("name", "?"))
    else:
        bad += 1
print(ok, bad, ",".join(skips))
PY
)
  passed=$((passed + p))
  failed=$((failed + f))
  [[ -z $s ]] || skipped+=("$1: $s")
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

suite() { # dir [meson setup options...] -- [meson test options...]
  local dir=$1 setup=()
  shift
  while [[ $1 != -- ]]; do
    setup+=("$1")
    shift
  done
  shift
  if ! configure "$dir" "${setup[@]}"; then
    echo "test.sh: meson setup failed in $dir" >&2
    failed=$((failed + 1))
    return
  fi
  run "$dir" "$@"
}

suite build --buildtype=debugoptimized -- --no-suite fuzz
suite build-san --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -- \
  --suite unit --suite sim --suite dpdk --suite e2e --suite tool
# Everything is built here, so that the tree keeps building with clang too.
CXX=clang++ suite build-fuzz --buildtype=debug -Dfuzz=true -- --suite fuzz

# A skipped test is neither: say which, so a machine missing a tool shows.
for s in "${skipped[@]}"; do echo "test.sh: skipped in $s"; done
echo "$passed passed, $failed failed"
((failed == 0))
