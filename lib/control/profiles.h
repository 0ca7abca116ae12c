// The controller's profiles and their rules: EV format profiles, EV
// profiles and CC profiles, as in the OCP controller API (mrc_ctl.h), each
// with the life INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT.
//
//   INIT     created, not configured; attributes may be staged
//   OFFLINE  configured, not usable by QPs; attributes may change; an
//            explicit EV profile's array is filled (REPLACE) here
//   ONLINE   QPs may attach; only EV states change; back to OFFLINE only
//            while no QP is attached (EBUSY)
//
// Every refusal is a Result with an errno-like code and a message that
// names the rule (docs/controller.md lists them). Profiles declared in the
// daemon's configuration file are ONLINE from the start and are changed in
// that file, not here (EPERM); their EVs' states may still change.
//
// Plain C++ (no DPDK, no I/O): softmrcd's control thread owns a Registry;
// persistence goes through to_json()/restore().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/json.h"
#include "engine/cc/congestion_control.h"
#include "engine/path/ev_set.h"
#include "wire/ev_expansion.h"
#include "wire/packet.h"

namespace softmrc::control {

enum class Err : uint8_t { kOk, kInval, kBusy, kNoent, kTooBig, kNotSup, kExist, kNoSpc, kPerm };
const char* err_name(Err e);  // "EINVAL", ...

struct [[nodiscard]] Result {
  Err code = Err::kOk;
  std::string message;

  bool ok() const { return code == Err::kOk; }
  static Result error(Err code, std::string message) { return Result{code, std::move(message)}; }
};

enum class ProfileState : uint8_t { kInit, kOffline, kOnline };
const char* profile_state_name(ProfileState s);
bool parse_profile_state(const std::string& s, ProfileState* out);

enum class EvProfileMode : uint8_t { kAuto, kExplicit, kGenerated };
const char* ev_profile_mode_name(EvProfileMode m);
bool parse_ev_profile_mode(const std::string& s, EvProfileMode* out);
bool parse_fmt_mode(const std::string& s, wire::EvMode* out);

// EV event mask bits: the EV states whose changes are reported (the values
// of engine::EvState).
inline constexpr uint32_t kEventGood = 1;
inline constexpr uint32_t kEventAssumedBad = 2;
inline constexpr uint32_t kEventDenied = 4;
inline constexpr uint32_t kEventAll = kEventGood | kEventAssumedBad | kEventDenied;

// What the device offers (dev show).
struct DeviceLimits {
  uint32_t max_fmt_profiles = 64;
  uint32_t max_ev_profiles = 64;
  uint32_t max_cc_profiles = 64;
  uint32_t max_evs_per_profile = engine::kMaxEvsPerQp;
  uint32_t ev_width_bits = wire::kEvValueBits;
  uint32_t num_ports = 1;  // ports are 1..num_ports (port N is plane N - 1)
};

// The longest an 'ev probe' waits for its replies (timeout-ms): softmrcd
// refuses more, and smrcctl waits that much longer for such a reply.
inline constexpr uint32_t kMaxProbeWaitMs = 10'000;

struct FmtProfile {
  uint64_t id = 0;
  ProfileState state = ProfileState::kInit;
  bool declared = false;
  std::optional<wire::EvMode> mode;
  std::vector<uint32_t> widths;  // bits per field
};

struct FmtChange {
  std::optional<wire::EvMode> mode{};
  std::optional<std::vector<uint32_t>> widths{};
  std::optional<ProfileState> state{};
};

// One EV of a profile's array: a stored value and the 1-based port it
// leaves on (0: unpopulated), with the state the controller gave it.
struct EvSlot {
  wire::EvValue value;
  uint8_t port = 0;
  engine::EvState state = engine::EvState::kGood;
};

struct EvProfile {
  uint64_t id = 0;
  ProfileState state = ProfileState::kInit;
  bool declared = false;
  std::string name;  // declared profiles: the configuration's name
  std::optional<EvProfileMode> mode;
  uint64_t fmt_id = 0;  // 0: none
  uint32_t count = 0;   // EVs
  uint32_t min_active = 1;
  uint32_t event_mask = kEventGood | kEventAssumedBad;
  std::vector<wire::EvField> fields;
  std::vector<EvSlot> evs;  // explicit and generated: the array (from OFFLINE on)
  uint32_t attached = 0;    // QPs using it
};

struct EvProfileChange {
  std::optional<EvProfileMode> mode{};
  std::optional<uint64_t> fmt_id{};
  std::optional<uint32_t> count{};
  std::optional<uint32_t> min_active{};
  std::optional<uint32_t> event_mask{};
  std::optional<std::vector<wire::EvField>> fields{};
  std::optional<ProfileState> state{};
};

struct CcProfile {
  uint64_t id = 0;
  ProfileState state = ProfileState::kInit;
  bool declared = false;
  std::string name;
  std::optional<engine::CcAlgorithm> algorithm;
  std::optional<engine::NsccParams> config;  // NSCC only
  uint32_t attached = 0;
};

struct CcChange {
  std::optional<engine::CcAlgorithm> algorithm{};
  std::optional<engine::NsccParams> config{};
  std::optional<ProfileState> state{};
};

class Registry {
 public:
  explicit Registry(const DeviceLimits& limits) : limits_(limits) {}
  const DeviceLimits& limits() const { return limits_; }

  // Creation: id 0 takes the lowest free id. A new profile is INIT.
  Result create_fmt(uint64_t id, uint64_t* out);
  Result create_ev(uint64_t id, uint64_t* out);
  Result create_cc(uint64_t id, uint64_t* out);
  // Only INIT or OFFLINE profiles that nothing uses go away.
  Result destroy_fmt(uint64_t id);
  Result destroy_ev(uint64_t id);
  Result destroy_cc(uint64_t id);

  // Attribute changes and the state change in one request: the attributes
  // are applied first, then the move, all or nothing.
  Result modify_fmt(uint64_t id, const FmtChange& c);
  Result modify_ev(uint64_t id, const EvProfileChange& c);
  Result modify_cc(uint64_t id, const CcChange& c);

  // EV operations on an explicit or generated profile's array.
  // REPLACE_EV: entry `index` (explicit only; OFFLINE only).
  Result replace_ev(uint64_t id, uint32_t index, const wire::EvValue& value, uint8_t port);
  // MODIFY_EV_STATE: the entries with this value and port become GOOD or
  // DENIED (the endpoint alone sets ASSUMED_BAD). *matched: their indexes.
  Result set_ev_state(uint64_t id, const wire::EvValue& value, uint8_t port, engine::EvState s,
                      std::vector<uint32_t>* matched);

  // A QP attaches at its INIT to ONLINE profiles (0: none of that kind).
  Result attach(uint64_t ev_id, uint64_t cc_id);
  void detach(uint64_t ev_id, uint64_t cc_id);

  // The QP's EVs (engine entries, wire form) for an ONLINE EV profile.
  Result qp_evs(uint64_t ev_id, std::vector<engine::EvEntry>* out) const;

  // Declared profiles (the configuration's), ONLINE at once.
  Result declare_fmt(uint64_t id, wire::EvMode mode, const std::vector<uint32_t>& widths);
  Result declare_ev(EvProfile p);
  Result declare_cc(CcProfile p);

  const FmtProfile* fmt(uint64_t id) const;
  const EvProfile* ev(uint64_t id) const;
  const CcProfile* cc(uint64_t id) const;
  const std::map<uint64_t, FmtProfile>& fmts() const { return fmts_; }
  const std::map<uint64_t, EvProfile>& evs() const { return evs_; }
  const std::map<uint64_t, CcProfile>& ccs() const { return ccs_; }

  // Persistence of the controller's own profiles (not the declared ones):
  // to_json() writes them with their states; restore() replays them
  // through the rules above, so a file that breaks them is refused.
  Json to_json() const;
  Result restore(const Json& j);

  // wire::EvFormat of a format profile.
  static wire::EvFormat format_of(const FmtProfile& f);

 private:
  Result transition(ProfileState from, ProfileState to, const char* what, uint64_t id) const;
  Result check_ev_config(const EvProfile& p) const;
  Result fill_array(EvProfile* p) const;
  Result check_ev_online(const EvProfile& p) const;

  DeviceLimits limits_;
  std::map<uint64_t, FmtProfile> fmts_;
  std::map<uint64_t, EvProfile> evs_;
  std::map<uint64_t, CcProfile> ccs_;
};

// JSON forms shared by the daemon's replies and the state file.
Json fmt_json(const FmtProfile& f);
Json ev_json(const EvProfile& p, bool with_array);
Json cc_json(const CcProfile& p);
std::string ev_value_hex(const wire::EvValue& v, uint32_t bits);  // "0x..." of the used bits
bool parse_ev_value(const std::string& s, wire::EvValue* out);    // hex, MSB first
// Words of a request: a whole number (decimal or 0x hex) up to `max`, and
// a list split at `sep`.
bool parse_number(const std::string& s, uint64_t max, uint64_t* out);
bool parse_number(const std::string& s, uint32_t* out);
std::vector<std::string> split_list(const std::string& s, char sep);
bool parse_cc_algorithm(const std::string& s, engine::CcAlgorithm* out);
// One NSCC parameter by its name in cc_json() (units in the names); EINVAL
// for an unknown name or a value that is not one of its type.
Result set_nscc_param(engine::NsccParams* n, const std::string& key, const std::string& value);
Result nscc_from_json(const Json& o, engine::NsccParams* out);

}  // namespace softmrc::control
