#pragma once
// The program's commands, in one table: main adds each to the app, names them in its
// message for a mistyped command, and runs the one that was parsed. A new command is a
// file in src/cli/ and one entry in command_table (cli/command_table.cpp).
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace copytask {

struct Command {
  std::string name;
  // Adds the subcommand to `app`, binding options the command owns; returns it.
  std::function<CLI::App*(CLI::App& app)> add;
  // Runs the command once CLI11 has parsed it; throws what command_run turns into a message
  // and an exit code (cli/command_errors.h).
  std::function<int()> run;
};

// Every command, in the order `copytask --help` lists them. command_line is the program's
// whole command line (the study commands record it in run.json).
std::vector<Command> command_table(const std::string& command_line);

// The commands' names, comma-separated, for messages ("train, compare, ...").
std::string command_names(const std::vector<Command>& commands);

}  // namespace copytask
