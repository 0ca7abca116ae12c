#!/usr/bin/env bash
# The main job: two MRC endpoints spray a multi-GiB transfer over four
# planes of an emulated fabric that trims on one plane, while another plane
# fails mid-transfer; every byte is verified. Extra arguments go to the
# program (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/app/smrc-loopback ]] || { echo "demo: run scripts/setup.sh first" >&2; exit 1; }
ninja -C build >/dev/null
exec build/app/smrc-loopback --gib 4 --planes 4 --fail-plane 2 --trim-plane 3 "$@"
