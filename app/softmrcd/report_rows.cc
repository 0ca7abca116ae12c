// What every report shares (see report.h): softmrcd's and smrc-fabric's.
#include <rte_telemetry.h>

#include <cstdio>

#include "cli/number.h"
#include "softmrcd/report.h"

namespace softmrc::softmrcd {

std::vector<std::string> split_params(const char* params) {
  std::vector<std::string> out;
  if (params == nullptr || *params == '\0') return out;
  std::string cur;
  for (const char* p = params; *p; ++p) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  out.push_back(cur);
  return out;
}

bool parse_u32(const std::string& s, uint32_t* out) {
  uint64_t v = 0;
  if (!cli::parse_uint(s, 0, UINT32_MAX, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

void add_port_counters(const rte_eth_stats& st, Row* r) {
  r->num("rx_packets", st.ipackets);
  r->num("rx_bytes", st.ibytes);
  r->num("tx_packets", st.opackets);
  r->num("tx_bytes", st.obytes);
  r->num("rx_missed", st.imissed);
  r->num("rx_errors", st.ierrors);
  r->num("tx_errors", st.oerrors);
  r->num("rx_nombuf", st.rx_nombuf);
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

namespace {

// Text as DPDK 22.11's JSON writer can take it: it escapes only quotes,
// backslashes and \n \r \t, drops other control bytes, and indexes a
// table with a negative char for bytes >= 0x80 (an out-of-bounds read that
// emits invalid JSON). Error messages quote a client's parameters.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

// An upper bound on the row's bytes in DPDK's JSON: quotes, colon and
// comma around every key and value, a number's 20 digits, text escaped.
size_t json_bound(const Row& row) {
  size_t n = row.name.size() + 8;
  for (const Field& f : row.fields) n += f.key.size() + 6 + (f.is_text ? 2 * f.text.size() : 20);
  return n;
}

}  // namespace

int put_report(const Report& report, const std::string& err, rte_tel_data* d, uint32_t first) {
  // What the command's name and the outer braces leave of 16 KiB, and the
  // dict's RTE_TEL_MAX_DICT_ENTRIES less the "more" row: every add fits.
  constexpr size_t kBudget = 15 * 1024;
  constexpr size_t kMaxRows = RTE_TEL_MAX_DICT_ENTRIES - 1;
  rte_tel_data_start_dict(d);
  if (!err.empty()) {
    rte_tel_data_add_dict_string(d, "error", printable(err).c_str());
    return 0;
  }
  size_t used = 0;
  for (size_t i = first; i < report.size(); ++i) {
    const Row& row = report[i];
    used += json_bound(row);
    rte_tel_data* fields = rte_tel_data_alloc();
    if (fields == nullptr) return -1;
    rte_tel_data_start_dict(fields);
    if (i > first && (used > kBudget || i - first == kMaxRows)) {
      rte_tel_data_add_dict_u64(fields, "next_first", i);
      rte_tel_data_add_dict_container(d, "more", fields, 0);
      break;
    }
    for (const Field& f : row.fields) {
      if (f.is_text)
        rte_tel_data_add_dict_string(fields, f.key.c_str(), printable(f.text).c_str());
      else
        rte_tel_data_add_dict_u64(fields, f.key.c_str(), f.num);
    }
    rte_tel_data_add_dict_container(d, row.name.c_str(), fields, 0);
  }
  return 0;
}

}  // namespace softmrc::softmrcd
