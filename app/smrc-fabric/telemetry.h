// smrc-fabric's DPDK telemetry commands, named as softmrcd's so that the
// same tools read both (dpdk-telemetry.py -f <file prefix>):
//
//   /softmrc/links          per link and plane, softmrcd's rows (counters,
//                           drops by reason, faults in force)
//   /softmrc/fabric/set     link,plane,what,value[,direction]: a change,
//                           as in softmrcd
//   /softmrc/fabric/ports   per port: its link, side and plane, the
//                           ethdev counters, its link state
//
// They run on DPDK's telemetry threads and read only what the links
// publish and what ethdev allows beside the bursts.
#pragma once

namespace softmrc::smrc_fabric {

class FabricProcess;

// Registers the commands (on the first call) and points them at `f`; with
// nullptr they answer {"error": "smrc-fabric is starting or stopping"}.
void attach_telemetry(FabricProcess* f);

}  // namespace softmrc::smrc_fabric
