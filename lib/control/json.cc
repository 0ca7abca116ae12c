// JSON values (see json.h).
#include "control/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace softmrc::control {

bool Json::as_uint(uint64_t* out) const {
  if (type_ == Type::kUint) {
    *out = u_;
    return true;
  }
  if (type_ == Type::kDouble && d_ >= 0 && d_ <= 9007199254740992.0 && std::floor(d_) == d_) {
    *out = static_cast<uint64_t>(d_);
    return true;
  }
  return false;
}

double Json::as_double() const {
  switch (type_) {
    case Type::kInt:
      return static_cast<double>(i_);
    case Type::kUint:
      return static_cast<double>(u_);
    case Type::kDouble:
      return d_;
    default:
      return 0;
  }
}

Json& Json::push(Json v) {
  items_.push_back(std::move(v));
  return items_.back();
}

Json& Json::set(const std::string& key, Json v) {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return items_[i] = std::move(v);
  keys_.push_back(key);
  items_.push_back(std::move(v));
  return items_.back();
}

const Json* Json::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &items_[i];
  return nullptr;
}

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no
// overlong forms, surrogates or code points above U+10FFFF), 0 if none.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b = at(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) {
    n = 2;
  } else if (b >= 0xe0 && b <= 0xef) {
    n = 3;
    if (b == 0xe0) lo = 0xa0;
    if (b == 0xed) hi = 0x9f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    n = 4;
    if (b == 0xf0) lo = 0x90;
    if (b == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

}  // namespace

bool is_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_sequence(s, i)) == 0) return false;
  return true;
}

// Bytes that are not UTF-8 (a client's words quoted back, cut at any byte)
// become U+FFFD, so every document is valid JSON.
std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD, as UTF-8 is written: as it is
      } else {
        out.append(s.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Json::dump() const {
  std::string out;
  dump_to(&out);
  return out;
}

void Json::dump_to(std::string* out) const {
  char buf[32];
  switch (type_) {
    case Type::kNull:
      *out += "null";
      break;
    case Type::kBool:
      *out += b_ ? "true" : "false";
      break;
    case Type::kInt:
      *out += std::to_string(i_);
      break;
    case Type::kUint:
      *out += std::to_string(u_);
      break;
    case Type::kDouble:
      if (!std::isfinite(d_)) {
        *out += "null";
      } else if (d_ == 0) {
        *out += '0';  // -0 too: read back, "-0" is the integer 0
      } else {
        std::snprintf(buf, sizeof(buf), "%.17g", d_);
        *out += buf;
      }
      break;
    case Type::kString:
      *out += json_quote(s_);
      break;
    case Type::kArray:
      *out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) *out += ',';
        items_[i].dump_to(out);
      }
      *out += ']';
      break;
    case Type::kObject:
      *out += '{';
      for (size_t i = 0; i < keys_.size(); ++i) {
        if (i) *out += ',';
        *out += json_quote(keys_[i]);
        *out += ':';
        items_[i].dump_to(out);
      }
      *out += '}';
      break;
  }
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  bool document(Json* out, std::string* err) {
    bool ok = value(out, 0);
    if (ok) {
      skip();
      ok = pos_ == t_.size() || fail("trailing characters");
    }
    if (!ok) *err = "at byte " + std::to_string(pos_) + ": " + why_;
    return ok;
  }

 private:
  bool fail(const char* why) {
    if (why_.empty()) why_ = why;
    return false;
  }
  void skip() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(pos_, word.size()) != word) return fail("not a JSON value");
    pos_ += word.size();
    return true;
  }

  bool value(Json* out, size_t depth) {
    skip();
    if (pos_ == t_.size()) return fail("unexpected end");
    const char c = t_[pos_];
    if (c == '{' || c == '[') {
      if (depth == kJsonMaxDepth) return fail("nested too deeply");
      return c == '{' ? object(out, depth + 1) : array(out, depth + 1);
    }
    if (c == '"') {
      std::string s;
      if (!string(&s)) return false;
      *out = Json(std::move(s));
      return true;
    }
    if (c == 't') return literal("true") && (*out = Json(true), true);
    if (c == 'f') return literal("false") && (*out = Json(false), true);
    if (c == 'n') return literal("null") && (*out = Json(), true);
    return number(out);
  }

  bool object(Json* out, size_t depth) {
    *out = Json::object();
    ++pos_;
    skip();
    if (pos_ < t_.size() && t_[pos_] == '}') return ++pos_, true;
    for (;;) {
      skip();
      std::string k;
      if (pos_ == t_.size() || t_[pos_] != '"') return fail("expected a key");
      if (!string(&k)) return false;
      skip();
      if (pos_ == t_.size() || t_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      Json v;
      if (!value(&v, depth)) return false;
      out->set(k, std::move(v));
      skip();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == '}') return ++pos_, true;
      return fail("expected ',' or '}'");
    }
  }

  bool array(Json* out, size_t depth) {
    *out = Json::array();
    ++pos_;
    skip();
    if (pos_ < t_.size() && t_[pos_] == ']') return ++pos_, true;
    for (;;) {
      Json v;
      if (!value(&v, depth)) return false;
      out->push(std::move(v));
      skip();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == ']') return ++pos_, true;
      return fail("expected ',' or ']'");
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  void utf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      *s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *s += static_cast<char>(0xc0 | cp >> 6);
      *s += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      *s += static_cast<char>(0xe0 | cp >> 12);
      *s += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
      *s += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool string(std::string* s) {
    ++pos_;  // the quote
    while (pos_ < t_.size()) {
      const char c = t_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *s += c;
        continue;
      }
      if (pos_ == t_.size()) break;
      const char e = t_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *s += e;
          break;
        case 'b':
          *s += '\b';
          break;
        case 'f':
          *s += '\f';
          break;
        case 'n':
          *s += '\n';
          break;
        case 'r':
          *s += '\r';
          break;
        case 't':
          *s += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = pos_ < t_.size() ? hex(t_[pos_++]) : -1;
            if (h < 0) return fail("bad \\u escape");
            cp = cp << 4 | static_cast<uint32_t>(h);
          }
          utf8(cp, s);  // surrogate halves are kept as they come
          break;
        }
        default:
          return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }

  bool number(Json* out) {
    const size_t start = pos_;
    if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
    bool whole = true;
    const size_t digits = pos_;
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
    if (pos_ == digits) return fail("not a JSON value");
    if (pos_ < t_.size() && t_[pos_] == '.') {
      whole = false;
      const size_t frac = ++pos_;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
      if (pos_ == frac) return fail("bad number");
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      whole = false;
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      const size_t exp = pos_;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
      if (pos_ == exp) return fail("bad number");
    }
    const std::string text(t_.substr(start, pos_ - start));
    errno = 0;
    if (whole && text[0] != '-') {
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = Json(static_cast<uint64_t>(v));
        return true;
      }
    } else if (whole) {
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = Json(static_cast<int64_t>(v));
        return true;
      }
    }
    *out = Json(std::strtod(text.c_str(), nullptr));
    return true;
  }

  std::string_view t_;
  size_t pos_ = 0;
  std::string why_;
};

}  // namespace

bool parse_json(std::string_view text, Json* out, std::string* err) {
  Json v;
  if (!Parser(text).document(&v, err)) return false;
  *out = std::move(v);
  return true;
}

}  // namespace softmrc::control
