// Names of the daemon's drop reasons (see stats.h).
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

const char* drop_name(Drop d) {
  switch (d) {
    case Drop::kRxNotForUs:
      return "rx_not_for_us";
    case Drop::kRxOtherVlan:
      return "rx_other_vlan";
    case Drop::kRxTooLong:
      return "rx_too_long";
    case Drop::kTxNoMbuf:
      return "tx_no_mbuf";
    case Drop::kTxBuild:
      return "tx_build_failed";
    case Drop::kTxNoPeer:
      return "tx_no_peer";
    case Drop::kTxPlaneDown:
      return "tx_plane_down";
    case Drop::kTxStalled:
      return "tx_stalled";
    case Drop::kTxPortLinkDown:
      return "tx_port_link_down";
    case Drop::kCount:
      break;
  }
  return "?";
}

}  // namespace softmrc::softmrcd
