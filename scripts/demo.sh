#!/usr/bin/env bash
# The main job: softmrcd hosts two MRC endpoints that spray a multi-GiB
# transfer over four planes of the emulated fabric; one plane trims all
# along, another fails mid-transfer and comes back; every byte is verified
# (config/softmrcd/demo.yaml, docs/daemon.md). Two cores, no hugepages.
# Extra arguments go to softmrcd (see its --help), e.g. -i for the prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/app/softmrcd ]] || { echo "demo: run scripts/setup.sh first" >&2; exit 1; }
# Quiet when the build is up to date; its errors are shown when it is not.
if ! build_log=$(ninja -C build 2>&1); then
  printf '%s\n' "$build_log" >&2
  echo "demo: the build failed (ninja -C build): see above" >&2
  exit 1
fi
exec build/app/softmrcd -l 0-1 --no-huge -m 512 --no-pci --file-prefix smrcd-demo \
  --log-level lib.eal:warning -- --config config/softmrcd/demo.yaml "$@"
