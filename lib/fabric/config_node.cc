// YAML accessors that name the key in every error; see config_node.h.
#include "fabric/config_node.h"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

namespace softmrc::fabric {

namespace {

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

ConfigNode top_level(const YAML::Node& n) {
  if (!n.IsMap()) throw ConfigError("the file must be a YAML mapping of keys to values");
  return ConfigNode(n, "");
}

}  // namespace

ConfigNode ConfigNode::load_file(const std::string& file) {
  try {
    return top_level(YAML::LoadFile(file));
  } catch (const YAML::BadFile&) {
    throw ConfigError("cannot read the file");
  } catch (const YAML::Exception& e) {
    throw ConfigError("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

ConfigNode ConfigNode::parse(const std::string& text) {
  try {
    return top_level(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

// Keys are names, each given once: yaml-cpp keeps a second one, which every
// lookup passes over, and takes a list or mapping as a key too.
ConfigNode::ConfigNode(const YAML::Node& node, std::string path)
    : node_(node), path_(std::move(path)) {
  if (!node_.IsMap()) return;
  std::map<std::string, int> line_of;
  for (const auto& kv : node_) {
    const int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar())
      throw ConfigError((path_.empty() ? "" : path_ + ": ") + "the key on line " +
                        std::to_string(line) + " is a list or mapping, not a name");
    const auto [first, fresh] = line_of.emplace(kv.first.Scalar(), line);
    if (!fresh)
      fail(kv.first.Scalar().c_str(), "is given twice (lines " + std::to_string(first->second) +
                                          " and " + std::to_string(line) + ")");
  }
}

std::string ConfigNode::key_path(const char* key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void ConfigNode::fail(const char* key, const std::string& problem) const {
  throw ConfigError(key_path(key) + ": " + problem);
}

bool ConfigNode::has(const char* key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

ConfigNode ConfigNode::map(const char* key) const {
  if (!has(key)) fail(key, "missing (a mapping is required)");
  const YAML::Node n = node_[key];
  if (!n.IsMap()) fail(key, "must be a mapping of keys to values");
  return ConfigNode(n, key_path(key));
}

ConfigNode ConfigNode::map_or_empty(const char* key) const {
  if (!has(key)) return ConfigNode(YAML::Node(YAML::NodeType::Map), key_path(key));
  return map(key);
}

std::vector<ConfigNode> ConfigNode::list(const char* key) const {
  std::vector<ConfigNode> out;
  if (!has(key)) return out;
  const YAML::Node n = node_[key];
  if (!n.IsSequence()) fail(key, "must be a list");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = key_path(key) + "[" + std::to_string(i) + "]";
    if (!n[i].IsMap()) throw ConfigError(p + ": must be a mapping of keys to values");
    out.emplace_back(n[i], p);
  }
  return out;
}

std::vector<std::string> ConfigNode::strings(const char* key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const YAML::Node n = node_[key];
  if (!n.IsSequence()) fail(key, "must be a list");
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar())
      throw ConfigError(key_path(key) + "[" + std::to_string(i) + "]: must be a single value");
    out.push_back(n[i].Scalar());
  }
  return out;
}

std::string ConfigNode::scalar(const char* key) const {
  const YAML::Node n = node_[key];
  if (!n.IsScalar()) fail(key, "must be a single value, not a list or mapping");
  return n.Scalar();
}

double ConfigNode::number(const char* key, double lo, double hi) const {
  if (!has(key))
    fail(key, "missing (a number in [" + format_number(lo) + ", " + format_number(hi) +
                  "] is required)");
  const std::string s = scalar(key);
  // Unlike strtod, from_chars takes no space, '+' or hex float.
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || end != s.data() + s.size() || ec != std::errc() || !std::isfinite(v) || v < lo ||
      v > hi)
    fail(key, "must be a number in [" + format_number(lo) + ", " + format_number(hi) + "], got '" +
                  s + "'");
  return v;
}

double ConfigNode::number(const char* key, double lo, double hi, double def) const {
  return has(key) ? number(key, lo, hi) : def;
}

uint64_t ConfigNode::integer(const char* key, uint64_t lo, uint64_t hi) const {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!has(key)) fail(key, "missing (an integer in " + range + " is required)");
  const std::string s = scalar(key);
  // Unlike strtoull, from_chars takes no space or sign: " -1" is no 2^64-1.
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || end != s.data() + s.size() || ec != std::errc() || v < lo || v > hi)
    fail(key, "must be an integer in " + range + ", got '" + s + "'");
  return v;
}

uint64_t ConfigNode::integer(const char* key, uint64_t lo, uint64_t hi, uint64_t def) const {
  return has(key) ? integer(key, lo, hi) : def;
}

bool ConfigNode::boolean(const char* key, bool def) const {
  if (!has(key)) return def;
  const std::string s = scalar(key);
  if (s == "true") return true;
  if (s == "false") return false;
  fail(key, "must be true or false, got '" + s + "'");
}

std::string ConfigNode::text(const char* key, const char* def) const {
  return has(key) ? scalar(key) : def;
}

size_t ConfigNode::choice(const char* key, std::initializer_list<const char*> options,
                          size_t def) const {
  if (!has(key)) return def;
  const std::string s = scalar(key);
  size_t i = 0;
  std::string list;
  for (const char* o : options) {
    if (s == o) return i;
    list += (i++ ? ", " : "") + std::string(o);
  }
  fail(key, "must be one of " + list + ", got '" + s + "'");
}

void ConfigNode::only(std::initializer_list<const char*> keys) const {
  if (!node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string& k = kv.first.Scalar();  // a name: see the constructor
    bool known = false;
    for (const char* allowed : keys) known = known || k == allowed;
    if (!known) {
      std::string list;
      for (const char* allowed : keys) list += (list.empty() ? "" : ", ") + std::string(allowed);
      fail(k.c_str(), "unknown key (known here: " + list + ")");
    }
  }
}

}  // namespace softmrc::fabric
