#!/usr/bin/env bash
# Runs the proof scenarios of config/scenarios (docs/simulation.md,
# "Results") with several seeds each and plots them:
#
#   scripts/sim-scenarios.sh [--seeds N] [--out DIR] [--build DIR] [scenario...]
#
# Defaults: 4 seeds, results in out/sim/<scenario>/, the simulator from
# build/. With no scenario named, every one but alltoall-1024 (which takes
# minutes: run it by name). Plots need python3-matplotlib (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=4
out=out/sim
build=build
names=()
while (($#)); do
  case $1 in
    --seeds) seeds=${2:?--seeds needs a count}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sim-scenarios: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "sim-scenarios: --seeds must be a positive integer" >&2; exit 2; }
sim=$build/app/smrc-sim/smrc-sim
[[ -x $sim ]] || { echo "sim-scenarios: $sim not built (ninja -C $build)" >&2; exit 2; }
if ((${#names[@]} == 0)); then
  for f in config/scenarios/*.yaml; do
    n=$(basename "$f" .yaml)
    [[ $n == alltoall-1024 ]] || names+=("$n")
  done
fi

for n in "${names[@]}"; do
  f=config/scenarios/$n.yaml
  [[ -f $f ]] || { echo "sim-scenarios: no scenario $f" >&2; exit 2; }
  echo "== $n"
  "$sim" "$f" --seeds "$seeds" --out "$out/$n" --no-progress
  scripts/sim-plot.py "$out/$n"
done
