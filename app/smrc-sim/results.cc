// Summaries, JSON and CSV; see results.h.
#include "results.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <memory>

namespace softmrc::sim {

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open(const std::string& path) {
  return File(std::fopen(path.c_str(), "w"), &std::fclose);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

double us(TimeNs ns) {
  return static_cast<double>(ns) / 1000;
}

double host_gbps(const RunResult& r, uint64_t bytes) {
  TimeNs span = 0;
  for (const StepRecord& s : r.steps) span += s.time_ns();
  return span ? static_cast<double>(bytes) * 8 / static_cast<double>(span) : 0;
}

std::vector<double> sorted_host_gbps(const RunResult& r) {
  std::vector<double> g;
  for (uint64_t b : r.host_rx_bytes)
    if (b) g.push_back(host_gbps(r, b));
  std::sort(g.begin(), g.end());
  return g;
}

}  // namespace

uint64_t RunResult::steps_failed() const {
  uint64_t n = 0;
  for (const StepRecord& s : steps) n += s.failed;
  return n;
}

TimeNs RunResult::step_quantile(double q) const {
  std::vector<TimeNs> t;
  for (const StepRecord& s : steps)
    if (s.complete) t.push_back(s.time_ns());
  std::sort(t.begin(), t.end());
  return quantile(t, q);
}

double bin_gbps(const RunResult& r, size_t b) {
  const TimeNs start = b * r.bin_ns;
  const TimeNs width = r.end_ns > start ? std::min(r.bin_ns, r.end_ns - start) : 0;
  return width ? static_cast<double>(r.bins[b].rx_bytes) * 8 / static_cast<double>(width) : 0;
}

void print_summary(std::FILE* out, const RunResult& r) {
  const std::vector<double> hg = sorted_host_gbps(r);
  const double line = static_cast<double>(r.host_rate_mbps) / 1000;
  std::fprintf(out, "%s seed %" PRIu64 ": %s at %.3f ms virtual (%s)\n",
               transport_name(r.transport), r.seed, r.finished ? "finished" : "DID NOT FINISH",
               us(r.end_ns) / 1000, r.stop.c_str());
  uint32_t complete = 0;
  for (const StepRecord& s : r.steps) complete += s.complete;
  std::fprintf(out, "  steps %u/%zu complete, transfers failed %" PRIu64 "\n", complete,
               r.steps.size(), r.steps_failed());
  if (complete)
    std::fprintf(out, "  step time us: p50 %.1f  p99 %.1f  max %.1f\n", us(r.step_quantile(0.5)),
                 us(r.step_quantile(0.99)), us(r.step_quantile(1)));
  else  // not 0.0: no step took no time
    std::fprintf(out, "  step time us: no step completed\n");
  std::fprintf(out, "  message completion us: p50 %.1f  p99 %.1f  max %.1f (%zu messages)\n",
               us(quantile(r.mct_ns, 0.5)), us(quantile(r.mct_ns, 0.99)), us(quantile(r.mct_ns, 1)),
               r.mct_ns.size());
  std::fprintf(out, "  per-transfer goodput Gb/s: min %.1f  p1 %.1f  p50 %.1f  (NIC %.0f)\n",
               quantile(r.flow_gbps, 0), quantile(r.flow_gbps, 0.01), quantile(r.flow_gbps, 0.5),
               line);
  std::fprintf(out, "  per-host goodput over the steps Gb/s: min %.1f  p50 %.1f  max %.1f\n",
               quantile(hg, 0), quantile(hg, 0.5), quantile(hg, 1));
  std::fprintf(out,
               "  fabric utilisation: leaf/spine mean %.1f%% max %.1f%%, NIC->leaf %.1f%%, "
               "leaf->NIC %.1f%%\n",
               100 * r.util_fabric, 100 * r.util_fabric_max, 100 * r.util_host_up,
               100 * r.util_host_down);
  const StackCounters& c = r.stack;
  std::fprintf(out,
               "  data packets %" PRIu64 ", retransmits %" PRIu64 " (trim %" PRIu64 " sack %" PRIu64
               " timeout %" PRIu64 " out-of-window %" PRIu64 " plane %" PRIu64
               " tail-probe %" PRIu64 "; needless %" PRIu64 "; go-back-N rewinds %" PRIu64
               ", arrivals discarded behind a hole %" PRIu64 "), timeouts %" PRIu64 "\n",
               c.data_packets, c.retransmits, c.retx_trim, c.retx_sack, c.retx_timeout, c.retx_oow,
               c.retx_plane, c.retx_tail_probe, c.needless, c.go_back_n, c.out_of_order_rx,
               c.timeouts);
  std::fprintf(out, "  fabric: trims %" PRIu64 ", CE marks %" PRIu64, r.trims, r.ce_marks);
  if (r.corruptions) std::fprintf(out, ", corrupted %" PRIu64, r.corruptions);
  std::fprintf(out, ", drops");
  for (size_t i = 1; i < r.drops.size(); ++i)
    if (r.drops[i])
      std::fprintf(out, " %s %" PRIu64,
                   fabric::drop_reason_name(static_cast<fabric::DropReason>(i)), r.drops[i]);
  std::fprintf(out,
               "\n  EV state changes: to ASSUMED_BAD %" PRIu64 ", back to GOOD %" PRIu64
               "; stale arrivals %" PRIu64 ", QP errors %" PRIu64 "\n",
               c.ev_to_bad, c.ev_to_good, c.stale_rx, c.qp_errors);
  std::fprintf(
      out, "  connections set up %" PRIu64 ", transfers that waited for a free QP %" PRIu64 "\n",
      c.connections, c.waits);
  if (c.icrc_errors || c.parse_errors || c.verify_failures)
    std::fprintf(out,
                 "  ICRC errors %" PRIu64 ", parse errors %" PRIu64
                 ", verification failures %" PRIu64 "\n",
                 c.icrc_errors, c.parse_errors, c.verify_failures);
  std::fprintf(out, "  cost: %" PRIu64 " events in %.2f s wall (%.2f M events/s)", r.events,
               r.wall_s, r.wall_s > 0 ? static_cast<double>(r.events) / r.wall_s / 1e6 : 0.0);
  if (r.rss_bytes)
    std::fprintf(out, ", %.1f KiB per host", static_cast<double>(r.rss_bytes) / 1024 / r.hosts);
  std::fprintf(out, "\n");
}

std::string write_results(const std::string& dir, const Scenario& sc,
                          const std::vector<RunResult>& runs) {
  File json = open(dir + "/summary.json");
  File steps = open(dir + "/steps.csv");
  File series = open(dir + "/timeseries.csv");
  File hosts = open(dir + "/hosts.csv");
  if (!json || !steps || !series || !hosts) return "cannot write into " + dir;

  std::fprintf(json.get(), "{\n  \"scenario\": %s,\n  \"description\": %s,\n  \"runs\": [\n",
               json_string(sc.name).c_str(), json_string(sc.description).c_str());
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const StackCounters& c = r.stack;
    const std::vector<double> hg = sorted_host_gbps(r);
    std::fprintf(json.get(),
                 "    {\"transport\": \"%s\", \"seed\": %" PRIu64
                 ", \"finished\": %s, "
                 "\"stop\": %s, \"end_us\": %.3f,\n",
                 transport_name(r.transport), r.seed, r.finished ? "true" : "false",
                 json_string(r.stop).c_str(), us(r.end_ns));
    std::fprintf(json.get(),
                 "     \"step_us\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}, "
                 "\"steps\": %zu, \"transfers_failed\": %" PRIu64 ",\n",
                 us(r.step_quantile(0.5)), us(r.step_quantile(0.99)), us(r.step_quantile(1)),
                 r.steps.size(), r.steps_failed());
    std::fprintf(json.get(),
                 "     \"mct_us\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}, "
                 "\"transfer_gbps\": {\"min\": %.3f, \"p1\": %.3f, \"p50\": %.3f},\n",
                 us(quantile(r.mct_ns, 0.5)), us(quantile(r.mct_ns, 0.99)),
                 us(quantile(r.mct_ns, 1)), quantile(r.flow_gbps, 0), quantile(r.flow_gbps, 0.01),
                 quantile(r.flow_gbps, 0.5));
    std::fprintf(json.get(),
                 "     \"host_gbps\": {\"min\": %.3f, \"p50\": %.3f, \"max\": %.3f}, "
                 "\"nic_gbps\": %.3f,\n",
                 quantile(hg, 0), quantile(hg, 0.5), quantile(hg, 1),
                 static_cast<double>(r.host_rate_mbps) / 1000);
    std::fprintf(json.get(),
                 "     \"utilisation\": {\"fabric\": %.4f, \"fabric_max\": %.4f, \"nic_up\": "
                 "%.4f, \"nic_down\": %.4f},\n",
                 r.util_fabric, r.util_fabric_max, r.util_host_up, r.util_host_down);
    std::fprintf(
        json.get(),
        "     \"packets\": {\"data\": %" PRIu64 ", \"retransmits\": %" PRIu64
        ", \"retx_trim\": %" PRIu64 ", \"retx_sack\": %" PRIu64 ", \"retx_timeout\": %" PRIu64
        ", \"retx_oow\": %" PRIu64 ", \"retx_plane\": %" PRIu64 ", \"retx_tail_probe\": %" PRIu64
        ", \"needless\": %" PRIu64 ", \"go_back_n\": %" PRIu64 ", \"out_of_order\": %" PRIu64
        ", \"timeouts\": %" PRIu64 ", \"trims\": %" PRIu64 ", \"ce_marks\": %" PRIu64
        ", \"corrupted\": %" PRIu64 ", \"stale\": %" PRIu64 "},\n",
        c.data_packets, c.retransmits, c.retx_trim, c.retx_sack, c.retx_timeout, c.retx_oow,
        c.retx_plane, c.retx_tail_probe, c.needless, c.go_back_n, c.out_of_order_rx, c.timeouts,
        r.trims, r.ce_marks, r.corruptions, c.stale_rx);
    std::fprintf(json.get(), "     \"drops\": {");
    for (size_t d = 1; d < r.drops.size(); ++d)
      std::fprintf(json.get(), "%s\"%s\": %" PRIu64, d > 1 ? ", " : "",
                   fabric::drop_reason_name(static_cast<fabric::DropReason>(d)), r.drops[d]);
    std::fprintf(json.get(),
                 "},\n     \"ev_to_bad\": %" PRIu64 ", \"ev_to_good\": %" PRIu64
                 ", \"qp_errors\": %" PRIu64 ", \"verify_failures\": %" PRIu64
                 ", \"parse_errors\": %" PRIu64 ", \"icrc_errors\": %" PRIu64 ",\n",
                 c.ev_to_bad, c.ev_to_good, c.qp_errors, c.verify_failures, c.parse_errors,
                 c.icrc_errors);
    std::fprintf(json.get(), "     \"faults\": [");
    for (size_t f = 0; f < r.faults.size(); ++f)
      std::fprintf(json.get(), "%s{\"at_us\": %.3f, \"what\": %s}", f ? ", " : "",
                   us(r.faults[f].at_ns), json_string(r.faults[f].what).c_str());
    std::fprintf(json.get(),
                 "],\n     \"events\": %" PRIu64
                 ", \"wall_s\": %.3f, \"rss_bytes_per_host\": %.0f}%s\n",
                 r.events, r.wall_s, r.hosts ? static_cast<double>(r.rss_bytes) / r.hosts : 0.0,
                 i + 1 < runs.size() ? "," : "");
  }
  std::fprintf(json.get(), "  ]\n}\n");

  std::fprintf(steps.get(),
               "transport,seed,step,start_us,time_us,done_us,transfers,failed,complete\n");
  std::fprintf(series.get(), "transport,seed,t_us,goodput_gbps,ev_to_bad,ev_to_good,drops,trims\n");
  std::fprintf(hosts.get(), "transport,seed,host,rx_bytes,gbps\n");
  for (const RunResult& r : runs) {
    const char* t = transport_name(r.transport);
    for (const StepRecord& s : r.steps)
      std::fprintf(steps.get(), "%s,%" PRIu64 ",%u,%.3f,%.3f,%.3f,%u,%u,%d\n", t, r.seed, s.step,
                   us(s.start_ns), us(s.time_ns()), us(s.done_ns), s.transfers, s.failed,
                   s.complete);
    for (size_t b = 0; b < r.bins.size(); ++b) {
      const Bin& x = r.bins[b];
      std::fprintf(series.get(), "%s,%" PRIu64 ",%.3f,%.3f,%u,%u,%u,%u\n", t, r.seed,
                   us(b * r.bin_ns), bin_gbps(r, b), x.ev_to_bad, x.ev_to_good, x.drops, x.trims);
    }
    for (size_t h = 0; h < r.host_rx_bytes.size(); ++h)
      std::fprintf(hosts.get(), "%s,%" PRIu64 ",%zu,%" PRIu64 ",%.3f\n", t, r.seed, h,
                   r.host_rx_bytes[h], host_gbps(r, r.host_rx_bytes[h]));
  }
  for (std::FILE* f : {json.get(), steps.get(), series.get(), hosts.get()})
    if (std::ferror(f)) return "error writing into " + dir;
  return {};
}

}  // namespace softmrc::sim
