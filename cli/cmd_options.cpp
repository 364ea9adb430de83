// `memtide-cli options`: the recorder's option table (recorder/options.inc), as printed by
// `memtide run --help`, plus the two queries the wrapper script needs:
//   --env-of FLAG   the environment variable behind `memtide run --FLAG` (exit 2 if none)
//   --check-env     validates every MEMTIDE_* option in the environment (exit 2 on a bad one)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

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
    if (o.kind == rec::OptKind::Bool && std::string(o.def) == "1") flag = std::string("--no-") + o.flag;
    else if (*kind_word(o.kind)) flag += std::string(" ") + kind_word(o.kind);
    if (std::string(o.flag) == "output") flag = "-o, " + flag;
    std::printf("  %-28s %s\n  %-28s (default: %s; environment: %s)\n", flag.c_str(), o.help, "", o.def, o.env);
  }
  std::printf("  %-28s %s\n", "--check", "after the run, apply `memtide check` to the trace (exit 1 on a breach;");
  std::printf("  %-28s %s\n", "", "the program's own failure wins); takes check's limits, --suppressions and");
  std::printf("  %-28s %s\n", "", "--include-reachable; turns --leak-scan on (--no-leak-scan: off)");
  std::printf("  %-28s %s\n", "--no-symbolize", "do not name the stacks' addresses while the program runs (memtide symbolize");
  std::printf("  %-28s %s\n", "", "--follow) nor append the names to the trace when it ends");
  std::printf("  %-28s %s\n", "", "(default: names appended; environment: MEMTIDE_SYMBOLIZE=0 turns it off)");
  return kExitOk;
}

}  // namespace

Command options_command() {
  return {"options", "List the recording options of `memtide run` (used by the wrapper)",
          [](CLI::App& sub) -> std::function<int()> {
            auto env_of = std::make_shared<std::string>();
            auto check = std::make_shared<bool>(false);
            sub.add_option("--env-of", *env_of, "print the environment variable of a run option");
            sub.add_flag("--check-env", *check, "validate the MEMTIDE_* variables of the environment");
            return [env_of, check]() -> int {
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
                int bad = 0;
                rec::options_from_env([&](const char* env, const char* value, const char* problem) {
                  std::fprintf(stderr, "memtide: bad value %s=%s: %s\n", env, value, problem);
                  ++bad;
                });
                return bad ? kExitError : kExitOk;
              }
              return print_table();
            };
          }};
}

}  // namespace memtide::cli
