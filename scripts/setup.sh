#!/usr/bin/env bash
# Installs every Debian package softmrc needs, then configures and builds
# into build/ (and build-san/ with ASan+UBSan when SOFTMRC_SANITIZE=1).
# Idempotent; runs as root on a fresh Debian 12 machine.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential pkg-config meson ninja-build
  dpdk dpdk-dev libdpdk-dev
  libtbb-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang clang-format libclang-rt-14-dev
  tshark python3 python3-matplotlib
  iproute2 procps # the tap test's namespaces: ip, and sysctl inside them
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; the answer does not matter here.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

configure() { # dir [meson options...]
  local dir=$1
  shift
  if [[ -f $dir/build.ninja ]]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}

configure build --buildtype=debugoptimized
ninja -C build

if [[ ${SOFTMRC_SANITIZE:-0} == 1 ]]; then
  configure build-san --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
  ninja -C build-san
fi
