// The subcommands of memtide-cli.
//
// To add one (say `report`): write cli/cmd_report.cpp defining `Command report_command()`,
// declare it below, append it to the table in all_commands(), and add the file to
// cli/CMakeLists.txt. main.cpp does the parsing, dispatch and exit-status mapping.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace memtide::cli {

struct Command {
  std::string_view name;
  std::string_view description;
  // Declares the subcommand's options and arguments on `sub` and returns the action that runs
  // it once parsing succeeded; the action returns the exit status (kExitOk / kExitError).
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

Command info_command();
Command options_command();
// Analysis commands (cmd_report.cpp, ...; helpers in analysis_cli.h).
Command report_command();
Command check_command();
Command summary_command();
Command flamegraph_command();
Command diff_command();
Command symbolize_command();
Command export_command();
Command segment_helper_command();

inline std::vector<Command> all_commands() {
  return {info_command(), options_command(), report_command(), check_command(), summary_command(),
          flamegraph_command(), diff_command(), symbolize_command(), export_command(), segment_helper_command()};
}

}  // namespace memtide::cli
