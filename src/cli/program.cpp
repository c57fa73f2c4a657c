// The program: logging set up, the commands added to CLI11's app, the one parsed run, and
// what it throws turned into a message and an exit code. main (src/main.cpp) only calls it,
// so that CLI11's header is compiled with the rest of the command line's files.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include "util/log.h"

#include "cli/command_errors.h"
#include "cli/command_table.h"
#include "cli/options.h"
#include "cli/program.h"
#include "model/cpu_variant.h"
#include "model/positional.h"
#include "train/interrupt.h"
#include "version.h"

namespace copytask {
namespace {
void on_signal(int) { stop_request(); }
}  // namespace

int program_main(int argc, char** argv) {
  log_setup();
  positional_rules_install();  // config checks name the registry's schemes
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{"copytask: positional-encoding schemes compared on the copy task"};
  app.set_version_flag("--version", std::string(version_string()) + " (" + git_commit() + ")");
  app.require_subcommand(1);
  const std::vector<Command> commands = command_table(command_line);
  std::vector<CLI::App*> subcommands;
  for (const auto& command : commands) subcommands.push_back(command.add(app));

  // CLI11 reports a mistyped command only as "a subcommand is required": say which.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = !app.get_subcommands([&](const CLI::App* sub) { return sub->check_name(first); }).empty();
  if (!first.empty() && first[0] != '-' && !known) {
    std::fprintf(stderr, "copytask: unknown command '%s'; commands: %s (see --help)\n", argv[1],
                 command_names(commands).c_str());
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);  // prints help, or the parse error with a hint
    return code == 0 ? kExitOk : kExitBadInput;
  }
  // A forced CPU kernel variant this CPU cannot run, or a misspelt one, stops here.
  if (const std::string message = cpu_variant_from_environment(); !message.empty()) {
    std::fprintf(stderr, "copytask: %s\n", message.c_str());
    return kExitBadInput;
  }
  // Each command runs inside command_run, which turns what it throws into the message and
  // the exit code (cli/command_errors.h).
  for (size_t i = 0; i < commands.size(); ++i)
    if (subcommands[i]->parsed()) return command_run(commands[i].name, commands[i].run);
  return kExitBadInput;
}

}  // namespace copytask
