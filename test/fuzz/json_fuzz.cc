// libFuzzer target for control::parse_json, which reads the controller's
// state file when softmrcd starts (a file anyone with write access to it
// may have edited) and softmrcd's replies in smrcctl. The promises checked:
//   - any bytes parse or are refused with a message, never a crash, a hang
//     or undefined behaviour (a nesting bomb included: kJsonMaxDepth);
//   - what parses writes out (dump) as text that parses again to a
//     document that writes out the same: what the daemon saves or answers
//     reads back as itself;
//   - any bytes quoted with json_quote parse back to the same string.
#include <cstdint>
#include <string>
#include <string_view>

#include "control/json.h"
#include "fuzz_endpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace softmrc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  control::Json doc;
  std::string err;
  if (control::parse_json(text, &doc, &err)) {
    const std::string once = doc.dump();
    control::Json again;
    if (!control::parse_json(once, &again, &err)) fuzz::fail("a dumped document does not parse");
    if (again.dump() != once) fuzz::fail("a dumped document changes when read back");
  } else if (err.empty()) {
    fuzz::fail("a refusal without a message");
  }
  // Quoted, UTF-8 reads back as itself; anything else as UTF-8 (U+FFFD for
  // what was not), which quotes to the same literal again.
  control::Json quoted;
  const std::string literal = control::json_quote(text);
  if (!control::parse_json(literal, &quoted, &err) || !quoted.is_string())
    fuzz::fail("a quoted string does not read back as a string");
  if (control::is_utf8(text) ? quoted.as_string() != text
                             : !control::is_utf8(quoted.as_string()) ||
                                   control::json_quote(quoted.as_string()) != literal)
    fuzz::fail("a quoted string does not read back as itself");
  return 0;
}
