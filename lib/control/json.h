// JSON values for the controller: the replies of softmrcd's control socket,
// smrcctl's rendering of them, and the controller's state file.
//
// A small document model (null, bool, number, string, array, object with
// keys in insertion order), a parser for untrusted text that bounds the
// nesting depth and the input it accepts, and a one-line writer. Numbers
// keep their integer value when they have one, so 64-bit counters and
// profile IDs survive a round trip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace softmrc::control {

class Json {
 public:
  enum class Type : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::kBool), b_(b) {}
  Json(int v) : Json(static_cast<int64_t>(v)) {}
  Json(int64_t v) : type_(v < 0 ? Type::kInt : Type::kUint), i_(v), u_(static_cast<uint64_t>(v)) {}
  Json(uint32_t v) : Json(static_cast<uint64_t>(v)) {}
  Json(uint64_t v) : type_(Type::kUint), u_(v) {}
  Json(double v) : type_(Type::kDouble), d_(v) {}
  Json(const char* s) : type_(Type::kString), s_(s) {}
  Json(std::string s) : type_(Type::kString), s_(std::move(s)) {}
  static Json array() { return Json(Type::kArray); }
  static Json object() { return Json(Type::kObject); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const {
    return type_ == Type::kInt || type_ == Type::kUint || type_ == Type::kDouble;
  }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return b_; }
  // A non-negative whole number (false for anything else).
  bool as_uint(uint64_t* out) const;
  double as_double() const;
  const std::string& as_string() const { return s_; }

  // Arrays.
  size_t size() const { return is_object() ? keys_.size() : items_.size(); }
  const Json& operator[](size_t i) const { return items_[i]; }
  Json& push(Json v);

  // Objects: set() replaces a key's value or appends the key.
  Json& set(const std::string& key, Json v);
  const Json* find(const std::string& key) const;
  const std::string& key(size_t i) const { return keys_[i]; }
  const Json& value(size_t i) const { return items_[i]; }

  // One line, no spaces.
  std::string dump() const;

 private:
  explicit Json(Type t) : type_(t) {}
  void dump_to(std::string* out) const;

  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<std::string> keys_;  // objects
  std::vector<Json> items_;        // array items, or object values
};

inline constexpr size_t kJsonMaxDepth = 32;

// Parses one JSON document (surrounding whitespace allowed). False with
// *err ("at byte N: <problem>") for anything else, including nesting
// deeper than kJsonMaxDepth.
bool parse_json(std::string_view text, Json* out, std::string* err);

// `s` as a JSON string literal, quotes included. Bytes that are not UTF-8
// become U+FFFD, so the literal reads back as `s` exactly when is_utf8(s).
std::string json_quote(std::string_view s);
bool is_utf8(std::string_view s);

}  // namespace softmrc::control
