// Reference traces: the reference scenario's trace for each transport must
// match the checked-in file line for line. A difference means behaviour
// changed (the engine, the fabric model or the baseline); if the change is
// intended, regenerate the files as test/sim/reference/reference.yaml says
// and review the diff like code.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim_util.h"

namespace softmrc::sim::test {
namespace {

const std::string kDir = std::string(SOFTMRC_SOURCE_ROOT) + "/test/sim/reference/";

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The first line that differs, as "line N:\n  expected: ...\n  actual:   ...".
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::istringstream e(expected), a(actual);
  std::string le, la;
  for (int line = 1;; ++line) {
    const bool ge = static_cast<bool>(std::getline(e, le));
    const bool ga = static_cast<bool>(std::getline(a, la));
    if (!ge && !ga) return "";
    if (ge != ga || le != la)
      return "line " + std::to_string(line) + ":\n  expected: " + (ge ? le : "<end>") +
             "\n  actual:   " + (ga ? la : "<end>");
  }
}

void check(TransportKind t) {
  const Scenario sc = load_scenario(kDir + "reference.yaml");
  const std::string file = kDir + "reference-" + transport_name(t) + ".trace";
  const std::string expected = read(file);
  ASSERT_FALSE(expected.empty()) << "cannot read " << file;
  const SimRun r = run(sc, t, sc.run.seed, true);
  const std::string diff = first_difference(expected, r.trace);
  EXPECT_TRUE(diff.empty()) << file << " no longer matches at " << diff
                            << "\nIf the change is meant, regenerate it (see reference.yaml).";
}

TEST(ReferenceTrace, Mrc) {
  check(TransportKind::kMrc);
}

TEST(ReferenceTrace, Baseline) {
  check(TransportKind::kRoce);
}

}  // namespace
}  // namespace softmrc::sim::test
