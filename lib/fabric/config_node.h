// Reading YAML configuration into plain validated structs, with every error
// naming its key: a ConfigNode is a YAML mapping plus the path that led to
// it ("topology.host_link"), and each accessor checks type and range and
// throws ConfigError("topology.host_link.gbps: must be a number in [1,
// 10000], got 'fast'") otherwise. only() rejects keys it does not list, so
// a misspelt key is an error rather than a silent default; a key given
// twice, or one that is a list or mapping, is an error too. Numbers are
// decimal: no hex, no sign on an integer, no space around.
//
// Used where configuration enters (topologies, fault schedules, scenarios);
// nothing on a packet path sees YAML.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace softmrc::fabric {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigNode {
 public:
  // The top-level mapping of a YAML file. Syntax errors carry the line.
  static ConfigNode load_file(const std::string& file);
  static ConfigNode parse(const std::string& text);  // for tests

  ConfigNode(const YAML::Node& node, std::string path);

  const std::string& path() const { return path_; }
  bool has(const char* key) const;
  ConfigNode map(const char* key) const;  // required mapping
  // A mapping if present, else an empty one (every key takes its default).
  ConfigNode map_or_empty(const char* key) const;
  // A sequence of mappings; empty if absent.
  std::vector<ConfigNode> list(const char* key) const;
  // A sequence of scalars; empty if absent.
  std::vector<std::string> strings(const char* key) const;

  double number(const char* key, double lo, double hi) const;  // required
  double number(const char* key, double lo, double hi, double def) const;
  uint64_t integer(const char* key, uint64_t lo, uint64_t hi) const;  // required
  uint64_t integer(const char* key, uint64_t lo, uint64_t hi, uint64_t def) const;
  bool boolean(const char* key, bool def) const;
  std::string text(const char* key, const char* def) const;
  // One of `options`; returns its index.
  size_t choice(const char* key, std::initializer_list<const char*> options, size_t def) const;

  // Any key not in `keys` is an error.
  void only(std::initializer_list<const char*> keys) const;

  [[noreturn]] void fail(const char* key, const std::string& problem) const;
  std::string key_path(const char* key) const;

 private:
  std::string scalar(const char* key) const;

  YAML::Node node_;
  std::string path_;
};

}  // namespace softmrc::fabric
