// Reading YAML configurations into validated structs: the machinery that
// softmrcd's configuration (config.h) and smrc-fabric's share, so both
// read values, name keys and word problems alike, and the one reader of a
// link's fabric keys (docs/configuration.md, links[]).
//
// A reader walks the document through Map, which knows the key path for
// messages and refuses keys it was never asked about (a misspelt key is an
// error, not a silently ignored default). The first problem throws a
// ConfigError, which read_yaml() turns into "<file>: <key>: <problem>".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "softmrcd/config.h"

namespace softmrc::softmrcd {

// Lcore ids are checked against the EAL at setup; this only bounds them.
inline constexpr uint64_t kMaxLcoreId = 1023;

struct ConfigError {
  std::string key;
  std::string problem;
};

[[noreturn]] inline void fail(const std::string& key, const std::string& problem) {
  throw ConfigError{key, problem};
}

// "'value'", or "a map" / "a list" for what is not a scalar.
std::string quoted(const YAML::Node& n);

// A whole number in [lo, hi]: decimal digits (leading zeros too: 010 is
// ten, not octal eight) or 0x and hex digits; no sign, no other base.
uint64_t whole_number(const YAML::Node& v, const std::string& key, uint64_t lo, uint64_t hi);

// A number in [lo, hi] in decimal notation, with an optional fraction,
// exponent or minus sign (1.25, 1e-3, -2); no hex, inf or nan.
double decimal_number(const YAML::Node& v, const std::string& key, double lo, double hi);

// yaml-cpp keeps both entries of a key given twice in one mapping, and a
// lookup finds the first: refuses `node` if it has one ("<path>.<key>: is
// given twice (lines <a> and <b>)").
void check_unique_keys(const YAML::Node& node, const std::string& path);

// A YAML mapping being read, with its key path.
class Map {
 public:
  Map(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) fail(path_, "must be a map of keys");
    check_unique_keys(node_, path_);
  }

  std::string key(const char* k) const { return path_.empty() ? k : path_ + "." + k; }
  bool has(const char* k) {
    seen_.insert(k);
    return node_ && node_.IsMap() && node_[k] && !node_[k].IsNull();
  }
  YAML::Node get(const char* k) {
    seen_.insert(k);
    return node_ && node_.IsMap() ? node_[k] : YAML::Node();
  }
  // A value's key: absent is the default, but a key written without a
  // value (`loss:`) is a mistake, not a way to ask for the default.
  bool has_value(const char* k) {
    seen_.insert(k);
    if (!node_ || !node_.IsMap() || !node_[k]) return false;
    if (node_[k].IsNull()) fail(key(k), "has no value (leave the key out for its default)");
    return true;
  }

  // Unsigned integer in [lo, hi], decimal or 0x hex; absent leaves *out.
  template <typename T>
  void uint(const char* k, uint64_t lo, uint64_t hi, T* out) {
    if (!has_value(k)) return;
    *out = static_cast<T>(whole_number(get(k), key(k), lo, hi));
  }

  // Decimal number in [lo, hi]; absent leaves *out.
  void number(const char* k, double lo, double hi, double* out) {
    if (!has_value(k)) return;
    *out = decimal_number(get(k), key(k), lo, hi);
  }

  void boolean(const char* k, bool* out) {
    if (!has_value(k)) return;
    const YAML::Node v = get(k);
    const std::string s = v.IsScalar() ? v.Scalar() : "";
    if (s == "true" || s == "yes" || s == "on")
      *out = true;
    else if (s == "false" || s == "no" || s == "off")
      *out = false;
    else
      fail(key(k), quoted(v) + " is not true or false");
  }

  std::string string(const char* k) {
    if (!has_value(k)) return "";
    const YAML::Node v = get(k);
    if (!v.IsScalar()) fail(key(k), "must be a string, not " + quoted(v));
    return v.Scalar();
  }

  std::string required_string(const char* k) {
    if (!has_value(k)) fail(key(k), "missing");
    return string(k);
  }

  // One of `names`; absent leaves *out.
  template <typename T>
  void choice(const char* k, std::initializer_list<std::pair<const char*, T>> names, T* out) {
    if (!has_value(k)) return;
    const std::string s = string(k);
    std::string list;
    for (const auto& [name, value] : names) {
      if (s == name) {
        *out = value;
        return;
      }
      list += list.empty() ? name : std::string(" or ") + name;
    }
    fail(key(k), "'" + s + "' is not " + list);
  }

  // The list under `k` (absent: empty).
  YAML::Node list(const char* k) {
    if (!has(k)) return YAML::Node(YAML::NodeType::Sequence);
    const YAML::Node v = get(k);
    if (!v.IsSequence()) fail(key(k), "must be a list");
    return v;
  }

  // Every key must have been asked for.
  void done() const {
    if (!node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      if (!kv.first.IsScalar())
        fail(path_.empty() ? "(file)" : path_, "has a key that is not a name: " + quoted(kv.first));
      const std::string k = kv.first.Scalar();
      if (!seen_.count(k)) fail(key(k.c_str()), "unknown key");
    }
  }

 private:
  YAML::Node node_;
  std::string path_;
  std::set<std::string> seen_;
};

inline std::string index_key(const std::string& list, size_t i) {
  return list + "[" + std::to_string(i) + "]";
}

// "net_memif0,role=server,..." -> "net_memif0": what names the device.
inline std::string device_name(const std::string& spec) {
  return spec.substr(0, spec.find(','));
}

// Values one file may give once (a device, a socket path): the second
// claim fails, naming the key of the first ("'<value>' is also <key>").
class ClaimedOnce {
 public:
  void claim(const std::string& value, const std::string& key) {
    const auto [first, fresh] = claims_.emplace(value, key);
    if (!fresh) fail(key, "'" + value + "' is also " + first->second);
  }

 private:
  std::map<std::string, std::string> claims_;  // value -> the key that claimed it
};

// `path_mtu` (256, 512, 1024, 2048, 4096 or 9000), if present.
void read_path_mtu(Map& m, uint32_t* out);

// `ev_mode` (udp, stev or srv6), if present.
void read_ev_mode(Map& m, wire::EvMode* out);

// The fabric keys of a link (rate_gbps, delay_us, buffer_kib, ecn_kib,
// priority_kib, overflow, loss, corrupt, corrupt_icrc, planes[],
// delay_line_packets, seed, schedule_from, schedule[]) from the link's map
// `m`, for `num_planes` planes.
void read_link_fabric(Map& m, uint32_t num_planes, LinkFabricSpec* out);

// Parses `text` (named `name` in messages) and hands the root to `read`.
// On failure *err is "<name>: <key>: <problem>" (or "<name>:<line>:<column>:
// YAML syntax error: ..." for text that is not YAML).
bool read_yaml(const std::string& text, const std::string& name,
               const std::function<void(const YAML::Node&)>& read, std::string* err);
// The same from a file ("<path>: cannot open: <reason>").
bool read_yaml_file(const std::string& path, const std::function<void(const YAML::Node&)>& read,
                    std::string* err);

}  // namespace softmrc::softmrcd
