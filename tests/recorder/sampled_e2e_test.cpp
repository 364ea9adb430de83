// End-to-end tests of sampled recording (`memtide run --sample SIZE`): real programs under the
// real preload and wrapper, the estimates of every reader against an exact run of the same
// deterministic work. The seeds are fixed (MEMTIDE_SAMPLE_SEED), so each test samples the same
// allocations on every run; the bounds are those a correct estimator meets with most seeds (the
// 95% intervals the report gives), not tuned to the seed.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/recorder/e2e_run.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using memtide::test::run;
using memtide::test::RunResult;
using memtide::test::TempDir;

namespace {

// Records `program` with `memtide run` and the extra run options; returns the trace's path.
std::string record(const TempDir& dir, const std::string& name, std::vector<std::string> options,
                   const std::vector<std::string>& program, RunResult* result = nullptr) {
  const std::string out = (dir.path() / (name + ".mtide")).string();
  std::vector<std::string> argv{MT_WRAPPER, "run", "--quiet", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  RunResult r = run(argv, {}, dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
  if (result) *result = r;
  return out;
}

json report(const TempDir& dir, const std::string& trace) {
  RunResult r = run({MT_WRAPPER, "report", "--json", "--top", "50", trace}, {}, dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

double ratio(double estimate, double exact) { return exact ? estimate / exact : 0; }

// The innermost frame of a report stack that names a function of the worker.
std::string worker_function(const json& stack) {
  for (const json& f : stack) {
    const std::string fn = f.value("function", "");
    for (const char* name : {"remember_session", "write_audit_line", "parse_request", "build_response"})
      if (fn.find(name) != std::string::npos) return name;
  }
  return "";
}

}  // namespace

TEST(Sampled, WorkerEstimatesAgreeWithAnExactRunOfTheSameWork) {
  TempDir dir;
  const std::vector<std::string> worker{MT_WORKER, "--threads", "1", "--requests", "200000"};
  RunResult plain = run(worker, {}, dir.path());
  ASSERT_EQ(plain.status, 0);
  RunResult er, sr;
  const std::string exact = record(dir, "exact", {}, worker, &er);
  const std::string sampled = record(dir, "sampled", {"--sample", "16KiB", "--sample-seed", "11"}, worker, &sr);
  EXPECT_EQ(er.out, plain.out) << "the program's output is unchanged";
  EXPECT_EQ(sr.out, plain.out) << "the program's output is unchanged";
  // (One allocation in about 220 is kept here, but a kept record costs some 17 times the bytes of
  // an exact one: its time and address are far from the record before it, and a SampleWeight
  // goes with it.)
  EXPECT_LT(fs::file_size(sampled) * 10, fs::file_size(exact)) << "a sampled trace is a fraction of the exact one";

  const json e = report(dir, exact), s = report(dir, sampled);
  ASSERT_FALSE(e.is_discarded());
  ASSERT_FALSE(s.is_discarded());
  EXPECT_TRUE(e["sampling"].is_null());
  ASSERT_TRUE(s["sampling"].is_object());
  EXPECT_EQ(s["sampling"]["interval_bytes"], 16384);
  const double samples = s["sampling"]["samples"].get<double>();
  const double total = e["total_allocated_bytes"].get<double>();
  // The number of samples of a Poisson process over the bytes: about total / interval.
  EXPECT_NEAR(samples, total / 16384, 4 * std::sqrt(total / 16384));
  EXPECT_NEAR(ratio(s["total_allocated_bytes"].get<double>(), total), 1.0, 0.02);
  EXPECT_NEAR(ratio(s["total_allocations"].get<double>(), e["total_allocations"].get<double>()), 1.0, 0.05);
  // The reported 95% interval is of the right size: the exact figure lies within twice its
  // half-width (beyond that for 1 seed in 10,000 when the variance is estimated right).
  EXPECT_LE(std::abs(s["total_allocated_bytes"].get<double>() - total), 2 * s["sampling"]["allocated_bytes_ci95"].get<double>());
  EXPECT_GT(s["sampling"]["allocated_bytes_ci95"].get<double>(), 0.001 * total);
  EXPECT_TRUE(s["temporary_allocations"].is_null()) << "a sampled trace cannot tell temporaries";

  // Every stack holding at least 5% of the bytes: within 10%, and with its samples and interval.
  std::map<std::string, double> exact_by_function, sampled_by_function;
  for (const json& j : e["top_allocators"]) exact_by_function[worker_function(j["stack"])] += j["bytes"].get<double>();
  for (const json& j : s["top_allocators"]) {
    sampled_by_function[worker_function(j["stack"])] += j["bytes"].get<double>();
    EXPECT_GT(j["samples"].get<int>(), 0);
    EXPECT_TRUE(j.contains("bytes_ci95"));
  }
  int big = 0;
  for (const auto& [fn, bytes] : exact_by_function) {
    if (fn.empty() || bytes < 0.05 * total) continue;
    ++big;
    EXPECT_NEAR(ratio(sampled_by_function[fn], bytes), 1.0, 0.10) << fn;
  }
  EXPECT_GE(big, 2) << "the worker's main allocating functions are compared";
}

TEST(Sampled, WorkerLeakFoundOnItsStack) {
  TempDir dir;
  const std::string trace = record(dir, "sampled", {"--sample", "4KiB", "--sample-seed", "5", "--leak-scan"},
                                   {MT_WORKER, "--threads", "2", "--requests", "200000"});
  const json s = report(dir, trace);
  ASSERT_FALSE(s.is_discarded());
  // The leak scan classifies the live sampled blocks: the audit lines are unreachable.
  ASSERT_TRUE(s["leak_scan"].is_object()) << s["leak_scan"].dump();
  EXPECT_GT(s["leak_scan"]["definite_bytes"].get<double>(), 0);
  bool found = false;
  for (const json& leak : s["leaks"])
    if (worker_function(leak["stack"]).find("write_audit_line") != std::string::npos) {
      found = true;
      EXPECT_GT(leak["samples"].get<int>(), 0);
      // 200 lines of 128 bytes, estimated.
      EXPECT_GT(leak["bytes"].get<double>(), 200 * 128 * 0.3);
      EXPECT_LT(leak["bytes"].get<double>(), 200 * 128 * 3.0);
    }
  EXPECT_TRUE(found) << s["leaks"].dump();
  // Every reader takes the sampled trace.
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"report", trace},
                                             {"flamegraph", "-o", (dir.path() / "f.svg").string(), trace},
                                             {"flamegraph", "--metric", "leaked", "-o", (dir.path() / "l.svg").string(), trace},
                                             {"diff", trace, trace},
                                             {"info", trace},
                                             {"check", "--max-leaked-bytes", "10MiB", trace}}) {
    std::vector<std::string> argv{MT_WRAPPER};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    RunResult r = run(argv, {}, dir.path());
    EXPECT_EQ(r.status, 0) << cmd[0] << ": " << r.err;
  }
  RunResult text = run({MT_WRAPPER, "report", trace}, {}, dir.path());
  EXPECT_NE(text.out.find("sampling    1 in ~4.00 KiB allocated"), std::string::npos) << text.out;
  RunResult check = run({MT_WRAPPER, "check", "--max-leaked-bytes", "10MiB", trace}, {}, dir.path());
  EXPECT_NE(check.out.find("the figures below are estimates"), std::string::npos) << check.out;
}

TEST(Sampled, CheckRefusesALimitOfZero) {
  TempDir dir;
  const std::string trace = record(dir, "sampled", {"--sample", "64KiB"}, {MT_SAMPLE_SWITCH, "0"});
  for (const std::vector<std::string>& limits :
       std::vector<std::vector<std::string>>{{}, {"--max-leaked-bytes", "0"}, {"--max-leaked-blocks", "0"}}) {
    std::vector<std::string> argv{MT_WRAPPER, "check"};
    argv.insert(argv.end(), limits.begin(), limits.end());
    argv.push_back(trace);
    RunResult r = run(argv, {}, dir.path());
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("a limit of 0 cannot be checked"), std::string::npos) << r.err;
  }
}

TEST(Sampled, SameSeedSamplesTheSameAllocations) {
  TempDir dir;
  const std::vector<std::string> worker{MT_WORKER, "--threads", "1", "--requests", "20000"};
  const json a = report(dir, record(dir, "a", {"--sample", "8KiB", "--sample-seed", "42"}, worker));
  const json b = report(dir, record(dir, "b", {"--sample", "8KiB", "--sample-seed", "42"}, worker));
  const json c = report(dir, record(dir, "c", {"--sample", "8KiB", "--sample-seed", "43"}, worker));
  EXPECT_EQ(a["sampling"]["samples"], b["sampling"]["samples"]);
  EXPECT_EQ(a["total_allocated_bytes"], b["total_allocated_bytes"]);
  EXPECT_NE(a["total_allocated_bytes"], c["total_allocated_bytes"]) << "another seed, other samples";
}

TEST(Sampled, SwitchAtRunTimeKeepsEveryPeriodRight) {
  TempDir dir;
  RunResult r;
  const std::string trace = record(dir, "switch", {}, {MT_SAMPLE_SWITCH, "65536"}, &r);
  EXPECT_EQ(r.out, "sampled at 65536, then 0; 1000 huge requests failed\n");
  const json s = report(dir, trace);
  ASSERT_FALSE(s.is_discarded());
  ASSERT_TRUE(s["sampling"].is_object());
  const json& changes = s["sampling"]["changes"];
  ASSERT_EQ(changes.size(), 2u) << changes.dump();
  EXPECT_EQ(changes[0]["interval_bytes"], 65536);
  EXPECT_EQ(changes[1]["interval_bytes"], 0);
  EXPECT_LT(changes[0]["time_ns"].get<double>(), changes[1]["time_ns"].get<double>());
  // Not freed: B's odd half (10,000,000 bytes, sampled) and C (300,000 bytes, exact). The
  // blocks of the first exact period were all freed after the switch: none may look leaked.
  const double leaked = s["leaked_bytes"].get<double>();
  EXPECT_NEAR(leaked / 10300000.0, 1.0, 0.25) << s["leaks"].dump();
  bool exact_c = false;
  for (const json& leak : s["leaks"])
    if (leak["bytes"] == 300000 && leak["count"] == 100) exact_c = leak["samples"] == 0;
  EXPECT_TRUE(exact_c) << "the blocks of the last exact period are exact: " << s["leaks"].dump();
  // Allocated: A 20 MB exact, then 200 MB + 20 MB sampled, then C exact. The failed requests
  // of 2^56 bytes each hold no sample and no bytes.
  EXPECT_NEAR(s["total_allocated_bytes"].get<double>() / 240300000.0, 1.0, 0.05);
  EXPECT_EQ(s["unknown_frees"], 0) << "frees of unsampled blocks are expected in a sampled trace";
}
