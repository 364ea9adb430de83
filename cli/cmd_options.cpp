// `memtide-cli options`: the recorder's option table (recorder/options.inc), as printed by
// `memtide run --help`, plus the two queries the wrapper script needs:
//   --env-of FLAG   the environment variable behind `memtide run --FLAG` (exit 2 if none)
//   --check-env     validates every MEMTIDE_* option in the environment (exit 2 on a bad one)
//                   and warns of the MEMTIDE_* variables that memtide does not know
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "recorder/options.h"

namespace memtide::cli {

namespace {

const char* kind_word(rec::OptKind k) {
  switch (k) {
    case rec::OptKind::Int: return "N";
    case rec::OptKind::Str: return "FILE";
    case rec::OptKind::Enum: return "NAME";
    case rec::OptKind::Bool: return "";
    case rec::OptKind::Size: return "SIZE";
  }
  return "";
}

int print_table() {
  for (const rec::OptionInfo& o : rec::kOptions) {
    std::string flag = std::string("--") + o.flag;
    if (o.kind == rec::OptKind::Bool) flag = std::string("--[no-]") + o.flag;
    else if (*kind_word(o.kind)) flag += std::string(" ") + kind_word(o.kind);
    if (std::string(o.flag) == "output") flag = "-o, " + flag;
    const std::string def = std::strcmp(o.def, o.sampled) ? std::string(o.def) + ", sampled: " + o.sampled : o.def;
    std::printf("  %-28s %s\n  %-28s (default: %s; environment: %s)\n", flag.c_str(), o.help, "", def.c_str(), o.env);
  }
  std::printf("  %-28s %s\n", "--check", "after the run, apply `memtide check` to the trace (exit 1 on a breach;");
  std::printf("  %-28s %s\n", "", "the program's own failure wins); turns --leak-scan on (--no-leak-scan: off);");
  std::printf("  %-28s %s\n", "", "its options are checked before the program starts:");
  std::printf("  %-28s %s\n", "  --max-leaked-bytes SIZE", "most leaked bytes allowed (default 0 when no leak limit is given)");
  std::printf("  %-28s %s\n", "  --max-leaked-blocks N", "most leaked blocks allowed");
  std::printf("  %-28s %s\n", "  --max-mismatched-frees N", "most frees by another family's call allowed (default 0)");
  std::printf("  %-28s %s\n", "  --max-peak-bytes SIZE", "highest heap peak allowed");
  std::printf("  %-28s %s\n", "  --suppressions FILE", "LeakSanitizer-format suppressions (repeatable)");
  std::printf("  %-28s %s\n", "  --alloc-fn GLOB", "a function the program allocates through: sites name its caller (repeatable)");
  std::printf("  %-28s %s\n", "  --include-reachable", "count still-reachable blocks as leaks too");
  std::printf("  %-28s %s\n", "  --max-growth RATE", "most heap growth after the warm-up, e.g. 64KiB/min");
  std::printf("  %-28s %s\n", "  --warmup DURATION", "the start of the run that growth does not count");
  std::printf("  %-28s %s\n", "  --allow-incomplete", "judge a trace cut short on what it holds");
  std::printf("  %-28s %s\n", "  --gen-suppressions", "print a suppression block for each leaking stack");
  std::printf("  %-28s %s\n", "  --error-exitcode N", "exit status when a limit is broken (default 1)");
  std::printf("  %-28s %s\n", "  --keep-traces all|failed", "failed: remove the traces of processes that passed");
  std::printf("  %-28s %s\n", "  --junit FILE", "also write a JUnit XML report");
  std::printf("  %-28s %s\n", "--no-symbolize", "do not name the stacks' addresses while the program runs (memtide symbolize");
  std::printf("  %-28s %s\n", "", "--follow) nor append the names to the trace when it ends");
  std::printf("  %-28s %s\n", "", "(default: names appended; environment: MEMTIDE_SYMBOLIZE=0 turns it off)");
  std::printf("\nSIZE: a number of bytes, or with a unit: KB, MB, GB (10^3, 10^6, 10^9 bytes), KiB, MiB, GiB\n"
              "(2^10, 2^20, 2^30 bytes): 500MB, 10GiB.\n");
  return kExitOk;
}

// The MEMTIDE_* variables that are not recording options but mean something all the same.
constexpr const char* kOtherVariables[] = {"MEMTIDE_MANIFEST", "MEMTIDE_SEGMENT_HELPER", "MEMTIDE_CHECK_OPTIONS", "MEMTIDE_SYMBOLIZE", "MEMTIDE_CACHE_DIR",
                                           "MEMTIDE_FULL_REPLAY",
                                           "MEMTIDE_TEST_CHUNK_BYTES", "MEMTIDE_KEEP_TEST_FILES",
                                           "MEMTIDE_UPDATE_GOLDEN", "MEMTIDE_CORPUS_DIR"};

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// A warning for each MEMTIDE_* variable of the environment that memtide does not know (a
// misspelling would otherwise be ignored without a word), naming the closest known one.
void warn_unknown_variables() {
  std::vector<std::string> known;
  for (const rec::OptionInfo& o : rec::kOptions) known.emplace_back(o.env);
  for (const char* v : kOtherVariables) known.emplace_back(v);
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("MEMTIDE_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string* best = nullptr;
    std::size_t best_d = SIZE_MAX;
    for (const std::string& k : known) {
      const std::size_t d = edit_distance(name, k);
      if (d < best_d) best_d = d, best = &k;
    }
    std::fprintf(stderr, "memtide: warning: %s is not a memtide variable (ignored)%s%s%s\n", printable(name).c_str(),
                 best ? "; did you mean " : "", best ? best->c_str() : "", best ? "?" : "");
  }
}

}  // namespace

Command options_command() {
  return {"options", "List the recording options of `memtide run` (used by the wrapper)",
          [](CLI::App& sub) -> std::function<int()> {
            auto env_of = std::make_shared<std::string>();
            auto check = std::make_shared<bool>(false);
            auto given = std::make_shared<std::vector<std::string>>();
            sub.add_option("--env-of", *env_of, "print the environment variable of a run option");
            sub.add_flag("--check-env", *check, "validate the MEMTIDE_* variables of the environment");
            sub.add_option("--given", *given,
                           "with --check-env: a run option given as a flag (its error names the flag); repeatable");
            return [env_of, check, given]() -> int {
              if (!env_of->empty()) {
                for (const rec::OptionInfo& o : rec::kOptions) {
                  if (*env_of == o.flag) {
                    std::printf("%s\n", o.env);
                    return kExitOk;
                  }
                }
                return kExitError;
              }
              if (*check) {
                warn_unknown_variables();
                int bad = 0;
                rec::options_from_env([&](const char* env, const char* value, const char* problem) {
                  const char* flag = nullptr;
                  for (const rec::OptionInfo& o : rec::kOptions)
                    if (std::string_view(o.env) == env &&
                        std::find(given->begin(), given->end(), o.flag) != given->end())
                      flag = o.flag;
                  if (flag) std::fprintf(stderr, "memtide: bad value --%s %s: %s\n", flag, value, problem);
                  else std::fprintf(stderr, "memtide: bad value %s=%s: %s\n", env, value, problem);
                  ++bad;
                });
                return bad ? kExitError : kExitOk;
              }
              return print_table();
            };
          }};
}

}  // namespace memtide::cli
