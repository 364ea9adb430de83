// memtide-cli: the commands behind `memtide info|report|...`. Parses the command line with
// CLI11, runs the chosen subcommand (cli/commands.h) and maps every failure to exit status 2.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"

int main(int argc, char** argv) {
  using namespace memtide::cli;
  CLI::App app{"Inspect and analyse memtide allocation traces.", "memtide"};
  app.set_version_flag("--version", std::string("memtide ") + MEMTIDE_VERSION);
  app.require_subcommand(1);
  // Usage errors on one line, in the same voice as every other memtide error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("memtide: ") + e.what() + " (see --help)\n";
  });

  // How text for a person looks, for every command (given before or after the command's name).
  bool full_names = false;
  std::string color = "auto";
  app.add_flag("--full-names", full_names, "Print C++ names whole (default: template arguments shortened to <...>)");
  app.add_option("--color", color, "Colour in the text output: auto (on a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));

  const std::vector<Command> commands = all_commands();
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(std::string(c.name), std::string(c.description));
    sub->fallthrough();
    actions.emplace_back(sub, c.setup(*sub));
  }
  // `memtide-cli help [CMD]`: the command's --help.
  if (argc >= 2 && std::string_view(argv[1]) == "help") {
    if (argc == 2) return std::cout << app.help(), kExitOk;
    for (auto& [sub, action] : actions)
      if (sub->get_name() == argv[2]) return std::cout << sub->help(), kExitOk;
    std::cerr << "memtide: unknown command '" << printable(argv[2]) << "' (see memtide help)\n";
    return kExitError;
  }

  // A first word that names no command: CLI11 would call it a missing subcommand.
  if (argc >= 2 && argv[1][0] != '-') {
    bool known = false;
    for (const Command& c : commands) known |= c.name == argv[1];
    if (!known) {
      std::cerr << "memtide: unknown command '" << printable(argv[1]) << "' (see memtide help)\n";
      return kExitError;
    }
  }

  // MEMTIDE_CHECK_OPTIONS gives `check` options before the command line's, which win (as
  // LSAN_OPTIONS does for LeakSanitizer): "error-exitcode=23 suppressions=ci/memtide.supp".
  std::vector<std::string> args(argv, argv + argc);
  if (argc >= 2 && args[1] == "check") {
    std::vector<std::string> env_args;
    if (const std::string err = check_options_from_env(env_args); !err.empty()) {
      std::cerr << "memtide: MEMTIDE_CHECK_OPTIONS: " << printable(err) << '\n';
      return kExitError;
    }
    // A key `check` does not know is the variable's error, said as such.
    CLI::App* check = nullptr;
    for (auto& [sub, action] : actions)
      if (sub->get_name() == "check") check = sub;
    for (const std::string& a : env_args) {
      const std::string name = a.substr(0, a.find('='));
      if (check && name != "--help" && !check->get_option_no_throw(name)) {
        std::cerr << "memtide: MEMTIDE_CHECK_OPTIONS: unknown option '" << printable(name.substr(2))
                  << "' (its keys are memtide check's options without the dashes: see memtide check --help)\n";
        return kExitError;
      }
    }
    args.insert(args.begin() + 2, env_args.begin(), env_args.end());
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // (CLI11 takes them last first)
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every usage error exits 2 (CLI11's own codes vary).
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitError;
  }

  set_style(full_names, color);
  try {
    for (auto& [sub, action] : actions) {
      if (!sub->parsed()) continue;
      capture_stdout();
      const int status = action();
      // Output that did not reach its file (a full disk, a closed pipe) is an error, not a
      // report: a CI job must not take a truncated report or an empty JSON file for a result.
      const bool stream_failed = !std::cout;
      const int err = stdout_error();
      const bool failed = err != 0 || stream_failed;
      if (failed && status != kExitError) {  // (a command that said so itself already failed)
        std::cerr << "memtide: cannot write the output: " << (err ? std::strerror(err) : "write error") << '\n';
        return kExitError;
      }
      return failed ? kExitError : status;
    }
  } catch (const std::exception& e) {
    (void)stdout_error();  // flushed, and the original streams back
    std::cerr << "memtide: " << e.what() << '\n';
    return kExitError;
  }
  return kExitError;
}
