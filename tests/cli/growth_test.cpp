// Growth end to end: tests/cli/programs/soak (a slow leak, a cache that fills and then holds, and
// churn, for 4 s) recorded with `memtide run`, exact and sampled; `memtide report --growth` and
// `memtide check --max-growth` on its traces.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/e2e_traces.h"

namespace memtide::test {
namespace {

// 64 B every 2 ms.
constexpr double kLeakPerMin = 64 * 500 * 60;

std::string soak(const std::string& name, const std::string& run_options, const std::string& args) {
  const std::string t = temp_dir() + "/" + name + ".mtide";
  const Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + t + " " + run_options + " -- " MT_SOAK " " + args);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  return t;
}

const std::string& leaking() {
  static const std::string t = soak("soak", "", "--seconds 4");
  return t;
}
const std::string& not_leaking() {
  static const std::string t = soak("soak-no-leak", "", "--seconds 4 --no-leak");
  return t;
}
const std::string& sampled() {
  static const std::string t = soak("soak-sampled", "--sample 2KiB --sample-seed 3", "--seconds 4");
  return t;
}

bool has_function(const json& stack, const std::string& fn) {
  for (const json& f : stack)
    if (f["function"].is_string() && f["function"].get<std::string>().find(fn) != std::string::npos) return true;
  return false;
}
bool lists(const json& items, const std::string& fn) {
  for (const json& g : items)
    if (has_function(g["stack"], fn)) return true;
  return false;
}

TEST(Growth, RanksTheSlowLeakFirstAndNeitherTheCacheNorTheChurn) {
  const json j = report(leaking(), "--growth");
  ASSERT_TRUE(j["growth"].is_array()) << j.dump();
  ASSERT_FALSE(j["growth"].empty());
  const json& first = j["growth"][0];
  EXPECT_TRUE(has_function(first["stack"], "leak_slowly")) << first.dump(1);
  EXPECT_NEAR(first["bytes_per_min"].get<double>(), kLeakPerMin, kLeakPerMin * 0.25);
  EXPECT_GT(first["steadiness"].get<double>(), 0.9);
  EXPECT_GT(first["end_blocks"].get<uint64_t>(), first["start_blocks"].get<uint64_t>());
  EXPECT_EQ(first["end_bytes"].get<uint64_t>(), 64 * first["end_blocks"].get<uint64_t>());
  EXPECT_FALSE(lists(j["growth"], "cache_insert")) << j["growth"].dump(1);
  EXPECT_FALSE(lists(j["growth"], "churn")) << j["growth"].dump(1);
  // The cache rose after the warm-up (0.4 s) until it was full (0.8 s), then held.
  EXPECT_TRUE(lists(j["growth_window"]["held"], "cache_insert")) << j["growth_window"].dump(1);
  const json& w = j["growth_window"];
  EXPECT_TRUE(w["problem"].is_null());
  EXPECT_GE(w["intervals"].get<uint64_t>(), 100u);
  EXPECT_NEAR(w["from_ns"].get<double>(), j["duration_ns"].get<double>() / 10, w["interval_ns"].get<double>());
}

TEST(Growth, TheTextReportListsTheLeakUnderGrowth) {
  const Proc r = cli("report --growth --top 3 " + leaking());
  EXPECT_EQ(r.status, 0) << r.err;
  const std::size_t growth = r.out.find("\nGROWTH (");
  ASSERT_NE(growth, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("leak_slowly", growth), std::string::npos) << r.out.substr(growth);
  EXPECT_NE(r.out.find("/min", growth), std::string::npos);
  EXPECT_EQ(r.out.find("report --growth"), std::string::npos);
}

TEST(Growth, TheGateFailsOnTheLeakAndPassesWithoutIt) {
  const std::string junit = temp_dir() + "/growth.xml";
  const Proc bad = cli("check --max-growth 64KiB/min --junit " + junit + " " + leaking());
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("FAIL heap growth"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("leak_slowly"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("leaks: not judged"), std::string::npos) << bad.out;
  const std::string xml = read_file(junit);
  EXPECT_NE(xml.find("message=\"heap growth"), std::string::npos) << xml;  // (the process's test case)
  EXPECT_NE(xml.find("<failure type=\"memtide.growth\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("leak_slowly"), std::string::npos);

  const Proc good = cli("check --max-growth 64KiB/min --junit " + junit + " " + not_leaking());
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("ok   heap growth: 0 B/min (limit 64.0 KiB/min)"), std::string::npos) << good.out;
  EXPECT_EQ(read_file(junit).find("<failure"), std::string::npos);

  // A limit above the leak's rate passes it.
  EXPECT_EQ(cli("check --max-growth 200MiB/h " + leaking()).status, 0);
  EXPECT_EQ(cli("check --max-growth 100MiB/h " + leaking()).status, 1) << "1.67 MiB/min";
  // With a leak limit too, leaks are judged as ever: the leak was not freed at exit.
  EXPECT_EQ(cli("check --max-growth 200MiB/h --max-leaked-bytes 1KiB " + leaking()).status, 1);
}

// A soak test's worker is killed, not stopped: its trace has no End record. Growth needs none,
// so the gate judges what was recorded (leaks would need the end: exit 2 without a leak limit).
TEST(Growth, AKilledWorkerIsJudgedOnWhatItRecorded) {
  const std::string t = temp_dir() + "/soak-killed.mtide";
  const Proc r = sh("(LD_PRELOAD=" MT_PRELOAD " MEMTIDE_OUTPUT=" + t + " exec " MT_SOAK " --seconds 30) & pid=$!; "
                    "sleep 2.5; kill -KILL $pid; wait $pid; true");
  ASSERT_EQ(r.status, 0) << r.err;
  const Proc bad = cli("check --max-growth 64KiB/min " + t);
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("growth judged on what was recorded"), std::string::npos) << bad.err;
  EXPECT_NE(bad.out.find("leak_slowly"), std::string::npos) << bad.out;
  EXPECT_EQ(cli("check --max-growth 64KiB/min --max-leaked-bytes 1MiB " + t).status, 2) << "leaks need the end";
}

TEST(Growth, TheGatesJsonHasTheLimitAndTheGrowingStacks) {
  const Proc r = cli("check --json --max-growth 1MiB/min " + leaking());
  EXPECT_EQ(r.status, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["result"], "fail");
  ASSERT_EQ(j["limits"].size(), 1u) << j["limits"].dump();
  EXPECT_EQ(j["limits"][0]["name"], "max-growth");
  EXPECT_EQ(j["limits"][0]["limit"], 1 << 20);
  EXPECT_TRUE(j["limits"][0]["broken"].get<bool>());
  EXPECT_EQ(j["leaks_counted"], "not judged");
  ASSERT_FALSE(j["growth"].empty());
  EXPECT_TRUE(has_function(j["growth"][0]["stack"], "leak_slowly"));
  EXPECT_EQ(j["limits"][0]["actual"].get<int64_t>(), j["growth_window"]["bytes_per_min"].get<int64_t>());
}

TEST(Growth, SampledRecordingFindsTheLeakToo) {
  const json j = report(sampled(), "--growth");
  ASSERT_TRUE(j["sampling"].is_object());
  ASSERT_FALSE(j["growth"].empty()) << j["growth_window"].dump(1);
  EXPECT_TRUE(has_function(j["growth"][0]["stack"], "leak_slowly")) << j["growth"].dump(1);
  EXPECT_NEAR(j["growth"][0]["bytes_per_min"].get<double>(), kLeakPerMin, kLeakPerMin * 0.5);
  EXPECT_FALSE(lists(j["growth"], "cache_insert")) << j["growth"].dump(1);
  EXPECT_EQ(cli("check --max-growth 64KiB/min " + sampled()).status, 1);
}

TEST(Growth, BadRatesAndWarmUpsAreUsageErrors) {
  EXPECT_EQ(cli("check --max-growth 64KiB " + leaking()).status, 2) << "a rate needs its unit of time";
  EXPECT_EQ(cli("check --max-growth fast/min " + leaking()).status, 2);
  EXPECT_EQ(cli("check --warmup 1s " + leaking()).status, 2) << "--warmup without --max-growth";
  EXPECT_EQ(cli("report --warmup 1s " + leaking()).status, 2) << "--warmup without --growth";
  EXPECT_EQ(cli("report --growth --warmup 1h " + leaking()).status, 2) << "times are s, ms, us, ns or min";
  const Proc late = cli("check --max-growth 64KiB/min --warmup 100s " + leaking());
  EXPECT_EQ(late.status, 2);
  EXPECT_NE(late.err.find("cannot judge growth: the warm-up (1 min 40 s) is not shorter than the run"), std::string::npos)
      << late.err;
  const json j = report(leaking(), "--growth --warmup 2min");
  EXPECT_TRUE(j["growth"].empty());
  EXPECT_TRUE(j["growth_window"]["problem"].is_string());
}

}  // namespace
}  // namespace memtide::test
