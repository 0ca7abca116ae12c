// What every program prints for --version.
#pragma once

#include <string>
#include <string_view>

namespace softmrc::cli {

// "<program> (softmrc) <release>\n": the first line of --version, in the
// GNU form; a program may add lines for what it runs on (DPDK, libsoftmrc).
std::string version_text(std::string_view program);

}  // namespace softmrc::cli
