#include "cli/version.h"

#include "cli/release.h"

namespace softmrc::cli {

std::string version_text(std::string_view program) {
  return std::string(program) + " (softmrc) " SOFTMRC_RELEASE "\n";
}

}  // namespace softmrc::cli
