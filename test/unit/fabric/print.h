// gtest printers for fabric enums, so failures read "link_down", not "<01>".
#pragma once

#include <ostream>

#include "fabric/link.h"

namespace softmrc::fabric {

inline void PrintTo(DropReason r, std::ostream* os) {
  *os << drop_reason_name(r);
}

}  // namespace softmrc::fabric
